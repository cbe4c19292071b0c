"""The human study: pairs sampled by rank distance, Label Studio's formats, labels stored once,
LaTeX rendered as MathML. The end-to-end run through a real Label Studio is in
``test_label_studio.py``."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from saber_assets.lib.math_html import render
from saber_assets.study.human_agreement import human_agreement
from saber_assets.study.human_study import (
    LABEL_SCHEMA,
    StudyError,
    human_pairs,
    label_config,
    labels_from_export,
    read_human_file,
    sample_study,
    store_labels,
    stored_labels,
    study_tasks,
)
from saber_resources.duckdb_files import DuckDBFile
from saber_resources.stores import DuckDBStore


def ratings_frame(queries: int = 6, candidates: int = 80) -> pl.DataFrame:
    """Candidate c{k} of each query rated 5 - k / candidates: rank k."""
    rows = [
        ("Algebra" if q % 2 else "Geometry", f"q{q}", f"c{q}_{k:02d}", 5 - k / candidates)
        for q in range(queries)
        for k in range(candidates)
    ]
    return pl.DataFrame(rows, schema=["domain", "query_id", "candidate_id", "rating"], orient="row")


def test_pairs_are_stratified_by_rank_distance_seeded_and_recorded():
    ratings = ratings_frame()
    s = sample_study(ratings, 90, seed=3, double_share=0.1, study="st")
    p = s.pairs
    assert p.height == 90 and p["task_id"].n_unique() == 90
    assert p.select("query", "a", "b").n_unique() == 90  # distinct pairs
    # an equal share per stratum, and each pair in the stratum its distance says
    assert dict(p.group_by("stratum").len().iter_rows()) == {0: 30, 25: 30, 50: 30}
    rank = {c: int(c.split("_")[1]) for c in ratings["candidate_id"]}
    for a, b, d, stratum in p.select("a", "b", "delta_r", "stratum").iter_rows():
        assert d == abs(rank[a] - rank[b]) and a < b
        assert stratum == (0 if d < 25 else 25 if d < 50 else 50)
    # the shown order is drawn per task (both orders occur) and is one of the pair's
    firsts = p.select((pl.col("shown_first") == pl.col("a")).alias("x"))["x"]
    assert 0 < firsts.sum() < 90
    assert (p["shown_first"] != p["shown_second"]).all()
    # 10% for two annotators, spread over the strata
    doubles = p.filter(pl.col("annotators") == 2)
    assert doubles.height == 9 and dict(doubles.group_by("stratum").len().iter_rows()) == {
        0: 3, 25: 3, 50: 3,
    }  # fmt: skip
    # seeded: the same seed, the same study; another seed, another one
    again = sample_study(ratings, 90, seed=3, double_share=0.1, study="st").pairs
    assert again.equals(p)
    other = sample_study(ratings, 90, seed=4, double_share=0.1, study="st").pairs
    assert not other.select("query", "a", "b").equals(p.select("query", "a", "b"))


def test_a_stratum_the_benchmark_cannot_fill_gives_its_share_away_and_says_so():
    s = sample_study(ratings_frame(candidates=30), 40, seed=1, study="st")
    assert dict(s.pairs.group_by("stratum").len().iter_rows()) == {0: 20, 25: 20}
    assert any("[50]" in n and "at most 30 candidates" in n for n in s.notes)
    with pytest.raises(StudyError, match="benchmark has"):
        sample_study(ratings_frame(queries=1, candidates=4), 7, seed=1)


def test_label_config_is_label_studio_xml_with_the_three_choices_and_their_keys():
    root = ET.fromstring(label_config())
    choices = root.find(".//Choices")
    assert choices.get("name") == "closer" and choices.get("toName") == "query"
    assert [(c.get("value"), c.get("hotkey")) for c in choices.findall("Choice")] == [
        ("1", "1"), ("2", "2"), ("tie", "t"),
    ]  # fmt: skip
    shown = {h.get("value") for h in root.iter("HyperText")}
    assert shown == {"$query_html", "$first_html", "$second_html"}


def test_latex_becomes_mathml_and_what_does_not_convert_stays_marked():
    r = render(
        r"Let $x^2+1$ cost \$5, and \[\frac{a}{b}\]; \(\arg z\) and $\foo{y}$ and $\left( x$."
    )
    assert r.formulas == 5
    assert (
        r.html.count("<math") == 3
        and '<math xmlns="http://www.w3.org/1998/Math/MathML" display="block">' in r.html
    )
    assert "cost $5" in r.html  # an escaped dollar is a price, not math
    assert [src for src, _ in r.unconverted] == [r"$\foo{y}$", r"$\left( x$"]
    assert 'class="latex-source"' in r.html and "unknown command \\foo" in r.html
    # prose is escaped, never markup
    assert "&lt;script&gt;" in render("<script>alert(1)</script>").html
    # an Asymptote figure is shown as its code, not read as LaTeX
    assert 'class="asy"' in render("[asy]draw((0,0)--(1,1));[/asy]").html
    with_align = render(r"\begin{align*} a&=b\\ c&=d \end{align*}")
    assert "<mtable" in with_align.html and not with_align.unconverted
    # a system of equations in $$…$$ (amsmath's aligned, gathered) is a table, no `&` left
    system = render("$$\n\\begin{aligned}\n(x-1)(y-2) & =0 \\\\\nx+y z & =9\n\\end{aligned}\n$$"
                    " and $$\\begin{gathered} a=b \\\\ c=d \\end{gathered}$$")  # fmt: skip
    assert system.html.count("<mtable") == 2 and "&amp;" not in system.html
    assert not system.unconverted
    # no self-closing tags: Label Studio's sanitiser reads <mi /> as an open element
    assert "/>" not in with_align.html and "<mspace" in render(r"$a \quad b$").html


def study_and_export(tmp_path):
    ratings = ratings_frame(queries=2, candidates=10)
    s = sample_study(ratings, 6, seed=0, double_share=0.5, study="st").pairs
    texts = {c: (f"Problem ${c}$", "Solution $1+1$") for c in ratings["candidate_id"]}
    texts |= {q: (f"Query {q}: $x$", None) for q in ratings["query_id"]}
    tasks, unconverted = study_tasks(s, texts)
    assert len(tasks) == 6 and not unconverted
    assert [t["overlap"] for t in tasks] == s["annotators"].to_list()
    export = []
    for k, t in enumerate(tasks):  # Label Studio's JSON export: tasks with their annotations
        anns = [{"id": 10 * k, "completed_by": 1, "was_cancelled": False,
                 "result": [{"from_name": "closer", "to_name": "query", "type": "choices",
                             "value": {"choices": ["1"]}}],
                 "created_at": "2026-12-01T10:00:00.5Z", "updated_at": "2026-12-01T10:00:01Z",
                 "lead_time": 4.5}]  # fmt: skip
        if t["overlap"] == 2:
            anns.append({**anns[0], "id": 10 * k + 1, "completed_by": {"id": 2, "email": "b@x"},
                         "result": [{**anns[0]["result"][0], "value": {"choices": ["tie"]}}]})  # fmt: skip
        export.append({"id": 100 + k, "data": t["data"], "annotations": anns})
    rated = set(ratings.select("query_id", "candidate_id").iter_rows())
    return ratings, s, export, rated


def test_label_studio_export_becomes_labels_and_what_does_not_fit_is_refused(tmp_path):
    ratings, study, export, rated = study_and_export(tmp_path)
    labels, refused = labels_from_export(export, study, rated, {1: "lead@x"})
    n2 = int((study["annotators"] == 2).sum())
    assert labels.height == 6 + n2 and refused.height == 0
    assert set(labels["annotator"]) == {"ls:1", "ls:2"}
    assert set(labels["annotator_email"]) == {"lead@x", "b@x"}
    assert labels.filter(pl.col("annotator") == "ls:1")["label"].unique().to_list() == ["first"]
    assert labels.filter(pl.col("annotator") == "ls:2")["label"].unique().to_list() == ["tie"]
    assert labels["lead_time_s"][0] == 4.5 and labels["labelled_at"][0].second == 1
    # as agreement rows: "first" is whichever candidate was shown first
    rows = human_pairs(labels.filter(pl.col("annotator") == "ls:1"))
    for r, s in zip(rows.iter_rows(named=True), study.iter_rows(named=True), strict=True):
        assert r["choice"] == ("a" if s["shown_first"] == s["a"] else "b")
    # what is refused, and why
    bad = json.loads(json.dumps(export))
    bad[0]["data"]["saber_task"] = "st:not-a-task"
    bad[1]["annotations"][0]["result"][0]["value"]["choices"] = ["1", "2"]
    bad[2]["annotations"][0]["result"][0]["value"]["choices"] = ["maybe"]
    bad[3]["data"]["first_id"], bad[3]["data"]["second_id"] = (
        bad[3]["data"]["second_id"], bad[3]["data"]["first_id"],
    )  # fmt: skip
    bad[4]["annotations"][0]["was_cancelled"] = True  # skipped: no label, nothing refused
    bad.append(
        {"id": 999, "data": {"text": "someone else's task"}, "annotations": bad[5]["annotations"]}
    )
    labels, refused = labels_from_export(bad, study, rated)
    reasons = refused["reason"].to_list()
    assert any(r.startswith("unknown task st:not-a-task") for r in reasons)
    assert any("2 choices under 'closer'" in r for r in reasons)
    assert any("choice 'maybe' is not one of" in r for r in reasons)
    assert any(f"task {study['task_id'][3]} shows" in r for r in reasons)
    assert any("Label Studio task 999 is no saber study task" in r for r in reasons)
    # a pair the benchmark does not rate (another build's benchmark) is refused
    _, refused = labels_from_export(export, study, rated - {(study["query"][0], study["a"][0])})
    assert refused.height >= 1 and "the benchmark has no pair" in refused["reason"][0]


def test_labels_are_stored_once_and_read_back(tmp_path):
    ratings, study, export, rated = study_and_export(tmp_path)
    labels, _ = labels_from_export(export, study, rated)
    db = DuckDBStore(DuckDBFile(str(tmp_path / "stores.duckdb")).connect)
    assert store_labels(db, labels) == (labels.height, 0)
    assert store_labels(db, labels) == (0, labels.height)  # a re-import adds nothing
    back = stored_labels(db, "st")
    assert back.height == labels.height and back.schema == pl.Schema(LABEL_SCHEMA)
    assert (
        back.sort("task_id", "annotator")
        .select("label")
        .equals(labels.sort("task_id", "annotator").select("label"))
    )
    assert stored_labels(db, "another study").height == 0


def test_agreement_known_answers_from_labels_that_copy_or_reverse_the_judge(tmp_path):
    ratings, study, export, rated = study_and_export(tmp_path)
    labels, _ = labels_from_export(export, study, rated)
    humans = human_pairs(labels.filter(pl.col("annotator") == "ls:1"))
    copy = {(q, a, b): c for q, a, b, c in humans.select("query", "a", "b", "choice").iter_rows()}
    flip = {k: "b" if v == "a" else "a" for k, v in copy.items()}
    _, summary = human_agreement(humans, {"copy": copy, "flip": flip}, ratings)
    at = {
        (p, d): a for p, d, a in summary.select("predictor", "delta_r_at_least", "agreement").rows()
    }
    assert at[("copy", 0)] == 1.0 and at[("flip", 0)] == 0.0
    # the paper's figures stand beside ours
    both = human_pairs(labels)
    _, summary = human_agreement(both, {"pairwise_judge": copy}, ratings)
    paper = {
        (p, d): x for p, d, x in summary.select("predictor", "delta_r_at_least", "paper").rows()
    }
    assert paper[("pairwise_judge", 0)] == pytest.approx(0.78)
    assert paper[("inter_annotator", 50)] == pytest.approx(0.857)
    # annotator 2 said tie where annotator 1 chose: ½ each
    inter = summary.filter(
        pl.col("predictor") == "inter_annotator", pl.col("delta_r_at_least") == 0
    )
    assert inter["agreement"][0] == 0.5 and inter["annotations"][0] == 3


def test_a_label_studio_export_file_is_an_annotation_file(tmp_path):
    ratings, study, export, rated = study_and_export(tmp_path)
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    humans = read_human_file(path)
    assert humans.height == 9 and set(humans["choice"]) <= {"a", "b", "tie"}
    export[0]["annotations"][0]["result"] = []
    path.write_text(json.dumps(export))
    from saber_assets.study.human_agreement import AnnotationError

    with pytest.raises(AnnotationError, match="0 choices under 'closer'"):
        read_human_file(path)
