"""Contamination measured on the text: known answers on the bundled problems."""

from __future__ import annotations

import gzip
import json
import re

import polars as pl

from saber_assets.config import REPO_ROOT, ContaminationConfig
from saber_assets.contamination.matches import (
    audit,
    exact_form,
    own_candidate_hits,
)

CORPORA = REPO_ROOT / "data" / "corpora"


def read(name: str) -> list[dict]:
    with gzip.open(CORPORA / f"{name}.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def rephrase(text: str, k: int) -> str:
    """Light edits a copy picks up: numbers changed, whitespace, LaTeX spacing."""
    text = re.sub(r"\d+", lambda m: str(int(m.group()) + 7 + k), text)
    text = text.replace(" ", "  ", 3).replace("=", r"\,=\,", 2).replace("$", " $ ", 2)
    return text.replace("\\frac", "\\dfrac") + "\n"


def benchmark():
    math = read("math")
    tests = [r for r in math if r["id"].startswith("test/") and len(r["problem"]) > 80][:40]
    trains = [r for r in math if r["id"].startswith("train/") and len(r["problem"]) > 80][:20]
    items = pl.DataFrame(
        [(r["id"], "query", "Algebra" if k % 2 else "Geometry", r["problem"])
         for k, r in enumerate(tests)]
        + [(r["id"], "candidate", "Algebra", r["problem"]) for r in trains],
        schema=["item", "role", "domain", "text"], orient="row",
    )  # fmt: skip
    olympiad = [(f"ob:{r['id']}", r["question"]) for r in read("olympiadbench")[:500]]
    return tests, items, olympiad


def test_a_training_corpus_with_planted_queries_flags_exactly_those():
    tests, items, olympiad = benchmark()
    verbatim = [(f"copy:{r['id']}", r["problem"]) for r in tests[:10]]
    changed = [(f"edit:{r['id']}", rephrase(r["problem"], k)) for k, r in enumerate(tests[10:15])]
    assert all(t != r["problem"] for (_, t), r in zip(changed, tests[10:15], strict=True))
    training = olympiad[:250] + verbatim + olympiad[250:] + changed
    matches, read_rows = audit(items, iter(training))
    assert read_rows == 515
    flagged = set(matches["item"])
    assert flagged == {r["id"] for r in tests[:15]}
    # each matched training row is the planted one, and how it was found is said
    for item, tid in matches.select("item", "training_id").iter_rows():
        assert tid.split(":", 1)[1] == item
    assert set(matches.filter(pl.col("item").is_in([r["id"] for r in tests[:10]]))["how"]) == {
        "exact"
    }
    # without number folding, copies with new numbers are no longer the same statement
    exact_only = audit(items, iter(training), ContaminationConfig(fold_numbers=False))[0]
    assert exact_form(changed[0][1], False) != exact_form(tests[10]["problem"], False)
    assert {r["id"] for r in tests[:10]} <= set(exact_only["item"])
    assert len(set(exact_only["item"]) & {r["id"] for r in tests[10:15]}) < 5  # folding mattered


def test_a_disjoint_corpus_flags_nothing():
    _, items, olympiad = benchmark()
    matches, read_rows = audit(items, iter(olympiad))
    assert read_rows == 500 and matches.height == 0


def test_a_query_planted_among_its_own_candidates_is_reported():
    tests, _, _ = benchmark()
    texts = {r["id"]: r["problem"] for r in tests}
    texts["planted"] = rephrase(tests[3]["problem"], 1)
    cands = pl.DataFrame(
        {"query_id": [tests[3]["id"]] * 5 + [tests[4]["id"]] * 4,
         "candidate_id": [tests[k]["id"] for k in (5, 6, 7, 8)] + ["planted"]
         + [tests[k]["id"] for k in (9, 10, 11, 12)]},
    )  # fmt: skip
    hits = own_candidate_hits(cands, texts)
    assert hits.select("query", "candidate").rows() == [(tests[3]["id"], "planted")]
    assert hits["jaccard"][0] > 0.5


def test_declared_training_data_names_alone_are_not_checked_and_local_text_is_read(tmp_path):
    from saber_assets.contamination.matches import (
        TrainingRead,
        corpus_files,
        declared_training,
        training_rows,
    )
    from saber_assets.retrievers.registry import load_registry

    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        json.dumps({"uid": "a1", "q": "Find $x$ if $x+1=2$."}) + "\n"
        + json.dumps({"uid": "a2", "q": ""}) + "\n"
    )  # fmt: skip
    reg = tmp_path / "retrievers.yaml"
    reg.write_text(f"""retrievers:
  - name: rader-like
    kind: bm25
    meta:
      training_data:
        - NuminaMath-CoT
        - {{name: math-train, bundled: math, id_prefix: "train/"}}
        - {{name: mine, path: "{mine}", fields: {{id: uid, problem: q}}}}
  - name: plain
    kind: bm25
""")
    entries = load_registry(reg)
    decl = declared_training(entries)
    assert decl["plain"] == {}
    assert decl["rader-like"]["NuminaMath-CoT"] is None  # declared, not checked
    math_train = decl["rader-like"]["math-train"]
    got = TrainingRead()
    rows = list(training_rows(math_train, corpus_files(math_train)[0], got))
    assert rows and all(i.startswith("train/") for i, _ in rows)
    math_ids = {r["id"] for r in read("math")}
    assert len(rows) == got.rows == sum(i.startswith("train/") for i in math_ids)
    mine_corpus = decl["rader-like"]["mine"]
    got = TrainingRead()
    assert list(training_rows(mine_corpus, corpus_files(mine_corpus)[0], got)) == [
        ("a1", "Find $x$ if $x+1=2$.")
    ]
    # the row without a problem is counted with its reason, never dropped silently
    assert got.rows == 1 and got.rejected == [("mine.jsonl", 2, "'q' empty or not text")]


def small_benchmark():
    """Six queries over twelve documents (the bundled MATH test problems), two domains."""
    from saber_assets.benchmark.data import DOC_SCHEMA, QUERY_SCHEMA, Benchmark

    math = [r for r in read("math") if r["id"].startswith("test/")][:12]
    docs = pl.DataFrame(
        [(f"math:{r['id']}", r["problem"], r["solution"]) for r in math],
        schema=DOC_SCHEMA, orient="row",
    )  # fmt: skip
    queries = pl.DataFrame(
        [
            {
                "id": f"math:{math[q]['id']}",
                "problem": math[q]["problem"],
                "solution": math[q]["solution"],
                # candidates: the next six documents, rated 5, 4, ... 0 (query 0: 0 ... 5)
                "candidates": [(q + 1 + k) % 12 for k in range(6)],
                "relevance_scores": [5.0, 4.0, 3.0, 2.0, 1.0, 0.0][:: -1 if q == 0 else 1],
                "domains": ["Algebra" if q % 2 else "Geometry"],
            }
            for q in range(6)
        ],
        schema=QUERY_SCHEMA,
    )
    return Benchmark(queries, docs, {"name": "small"})


def runs_of(bench, seed: int = 3):
    """Per-query nDCG of a made-up retriever, two settings."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = []
    for setting in ("statement-statement", "full-full"):
        for qid, domains in bench.queries.select("id", "domains").iter_rows():
            v = float(rng.uniform())
            rows.append({
                "query_id": qid, "setting": setting, "domains": domains, "ndcg": v,
                "ndcg_linear": v, "failed": False, "full_ndcg_prime": v,
                "full_recall_top5_at100": 1.0, "latency_ms": 1.0,
            })  # fmt: skip
    return pl.DataFrame(rows)


def test_items_roles_and_the_queries_a_match_contaminates():
    from saber_assets.contamination.matches import (
        benchmark_items,
        contaminated_queries,
        overlap_summary,
        top_candidates,
    )

    bench = small_benchmark()
    items, roles = benchmark_items(bench)
    ids = bench.documents["id"].to_list()
    assert items["item"].to_list() == sorted(ids)  # every query and candidate once
    q0 = bench.queries["id"][0]
    # query 1 is also a candidate of query 0 (Geometry)
    assert roles.filter(pl.col("item") == ids[1]).select("role", "domain").rows() == [
        ("candidate", "Geometry"),
        ("query", "Algebra"),
    ]
    # the five best-rated, not the first listed (query 0 rates its candidates upwards)
    assert top_candidates(bench)[q0] == [ids[6], ids[5], ids[4], ids[3], ids[2]]
    # document 7: the sixth candidate of query 1 (rated 0, not counted), among the five best of
    # queries 2-5
    assert contaminated_queries(bench, [ids[7]]) == {bench.queries["id"][k] for k in (2, 3, 4, 5)}
    assert contaminated_queries(bench, [q0]) == {q0}  # its statement; no one's candidate
    summary = overlap_summary(pl.DataFrame({"item": [q0]}), roles)
    row = summary.filter((pl.col("role") == "query") & (pl.col("domain") == "all")).row(
        0, named=True
    )
    assert (row["items"], row["overlapping"]) == (6, 1)


def test_the_clean_score_is_the_full_score_when_nothing_overlaps_and_recomputed_otherwise():
    from saber_assets.contamination.matches import contaminated_queries
    from saber_assets.leaderboard.contamination_columns import contamination_columns
    from saber_assets.leaderboard.scores import score_table
    from saber_assets.retrievers.entries import TrainingCorpus

    bench = small_benchmark()
    runs = runs_of(bench)

    def rescore(r):
        return score_table(r, ["Algebra", "Geometry"], 200, 7)

    rep = rescore(runs)
    corpus = TrainingCorpus(name="t", bundled="math")
    declared = {"t": corpus, "numina": None}
    cols = contamination_columns(rep, runs, bench, declared, {"t": set()}, 5, rescore)
    assert cols["contaminated_share"].to_list() == [0.0, 0.0]
    assert cols["ndcg@10_clean"].to_list() == rep["ndcg@10"].to_list()
    assert cols["ci_low_clean"].to_list() == rep["ci_low"].to_list()
    assert cols["ci_high_clean"].to_list() == rep["ci_high"].to_list()
    assert set(cols["training_checked"]) == {"t"} and set(cols["training_declared_only"]) == {
        "numina"
    }
    # a match: the clean score is the report on the other queries, with its own CI
    hit = {bench.documents["id"][7]}
    bad = contaminated_queries(bench, hit)
    cols = contamination_columns(rep, runs, bench, declared, {"t": hit}, 5, rescore)
    clean = rescore(runs.filter(~pl.col("query_id").is_in(sorted(bad))))
    assert cols["contaminated_share"].to_list() == [len(bad) / 6] * 2
    assert cols["ndcg@10_clean"].to_list() == clean["ndcg@10"].to_list() != rep["ndcg@10"].to_list()
    # every query contaminated: no clean score; no audit yet: declared only, said so
    every = set(bench.documents["id"])
    assert cols.pipe(lambda _: contamination_columns(
        rep, runs, bench, declared, {"t": every}, 5, rescore))["ndcg@10_clean"].is_null().all()  # fmt: skip
    cols = contamination_columns(rep, runs, bench, declared, {}, 5, rescore)
    assert cols["contaminated_share"].is_null().all()
    assert set(cols["training_declared_only"]) == {"numina, t (not audited yet)"}


def test_the_paragraph_names_the_rows_that_move():
    from saber_assets.leaderboard.contamination_columns import (
        contamination_paragraph,
        rows_that_move,
    )

    board = pl.DataFrame({
        "retriever": ["a", "b", "c"], "setting": ["s"] * 3, "ndcg@10": [0.6, 0.5, 0.4],
        "ndcg@10_clean": [0.45, None, None], "ci_low_clean": [0.4, None, None],
        "ci_high_clean": [0.5, None, None], "contaminated_share": [0.3, None, None],
        "training_checked": ["math-train", "", ""], "training_declared_only": ["", "numina", ""],
    })  # fmt: skip
    moved = rows_that_move(board)
    assert moved.select("retriever", "rank_full", "rank_clean").rows() == [("b", 2, 1), ("a", 1, 2)]
    text = contamination_paragraph(board)
    assert "a / s (math-train): 30% of the queries overlap, nDCG 0.600 → 0.450" in text
    # only the checked row is named (b moves because a does)
    assert "a would rank 2 instead of 1 in s" in text and "b would rank" not in text
    assert "Declared by name only, not checked: b (numina)." in text
    still = board.with_columns(pl.Series("ndcg@10_clean", [0.55, None, None]))
    assert "No checked row changes rank" in contamination_paragraph(still)


def test_training_corpora_from_folders_and_the_hub_and_conflicting_declarations(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from saber_assets.contamination.matches import (
        TrainingRead,
        checked_corpora,
        corpus_files,
        training_corpus_version,
        training_rows,
    )
    from saber_assets.retrievers.entries import RegistryError
    from saber_assets.retrievers.registry import load_registry

    folder = tmp_path / "numina" / "data"
    folder.mkdir(parents=True)
    for k in range(2):
        pq.write_table(
            pa.table({"uid": [f"n{k}{j}" for j in range(3)],
                      "question": ["Solve $x^2=4$.", None, "Add 1 and 2."]}),
            folder / f"train-0000{k}-of-00002.parquet",
        )  # fmt: skip
    reg = tmp_path / "r.yaml"
    reg.write_text(f"""retrievers:
  - name: a
    kind: bm25
    meta: {{training_data: [{{name: numina, path: "{folder}", fields: {{id: uid, problem: question}}}}]}}
  - name: b
    kind: tfidf
    meta:
      training_data:
        - {{name: numina, path: "{folder}", fields: {{id: uid, problem: question}}}}
        - {{name: hubbed, hub: "org/numina@abc123", fields: {{id: uid, problem: question}}}}
""")
    corpora = checked_corpora(load_registry(reg))
    assert list(corpora) == ["hubbed", "numina"]  # one partition per corpus, declared twice
    files, revision = corpus_files(corpora["numina"])
    assert [f.name for f in files] == ["train-00000-of-00002.parquet",
                                       "train-00001-of-00002.parquet"] and revision is None  # fmt: skip
    read = TrainingRead()
    assert [i for i, _ in training_rows(corpora["numina"], files, read)] == [
        "n00",
        "n02",
        "n10",
        "n12",
    ]
    assert [r[1:] for r in read.rejected] == [(2, "'question' empty or not text")] * 2
    # a Hub id goes through the Hub reader (a fake here), pinned to its revision
    asked = []

    def fetch(repo, rev):
        asked.append((repo, rev))
        return tmp_path / "numina", "abc123" + "0" * 34

    files, revision = corpus_files(corpora["hubbed"], fetch)
    assert asked == [("org/numina", "abc123")] and len(files) == 2 and revision.startswith("abc123")
    # the data version follows the files' content
    before = training_corpus_version(corpora["numina"])
    pq.write_table(
        pa.table({"uid": ["z"], "question": ["new"]}), folder / "train-00000-of-00002.parquet"
    )
    assert training_corpus_version(corpora["numina"]) != before
    # one name, two texts: an error naming both entries
    reg.write_text(reg.read_text().replace("name: numina, path", "name: numina, bundled: math, x", 1)
                   .replace(f', x: "{folder}", fields: {{id: uid, problem: question}}', ""))  # fmt: skip
    with pytest.raises(ValueError, match="'numina' is declared differently by 'a' and 'b'"):
        checked_corpora(load_registry(reg))
    with pytest.raises((RegistryError, ValueError), match="at most one of path, bundled, hub"):
        reg.write_text("retrievers:\n  - {name: a, kind: bm25, meta: {training_data: "
                       "[{name: t, bundled: math, hub: x/y}]}}\n")  # fmt: skip
        load_registry(reg)
