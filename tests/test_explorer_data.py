"""The explorer's data, without a browser: the query browser's rows, a query page's data, the
vendored chart library, and what `saber diff` says changed between two builds."""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from itertools import combinations

import numpy as np
import polars as pl
import pytest

from saber_assets.cli import main
from saber_assets.leaderboard.joint import GradePosterior, grade_intervals, grade_posteriors
from saber_assets.lib.math_html import spans
from saber_assets.ratings.bradley_terry import rescale
from saber_assets.runs.metrics import gains, ndcg_at_k
from saber_assets.site.build_diff import (
    BuildState,
    diff_builds,
    diff_lines,
    remember,
)
from saber_assets.site.explorer import judge_facts, snippet_source
from saber_assets.site.explorer_query import (
    judgment_rows,
    query_data,
    ranking,
    script_json,
    text_html,
)


def test_the_vendored_chart_library_is_the_pinned_one():
    vendor = resources.files("saber_assets.site").joinpath("explorer_static", "vendor")
    record = json.loads(vendor.joinpath("VENDORED.json").read_text())
    for name, pin in record["files"].items():
        data = vendor.joinpath(name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == pin["sha256"], name
        assert f"v{pin['version']}" in data[:200].decode(), name
        assert pin["tarball"].startswith("https://registry.npmjs.org/")
    assert vendor.joinpath("chart.js-LICENSE.md").read_text().startswith("The MIT License")


@pytest.mark.parametrize(
    "text",
    [
        "Let $x^2 + y^2 = 1$ be a circle. " * 20,
        "$$\\int_0^1 f(x)\\,dx = " + "1 + " * 200 + "1$$ then stop",
        "Find " + "a" * 230 + " $\\frac{1}{2}$ and more words after it " * 5,
    ],
)
def test_a_snippet_never_cuts_a_formula(text):
    cut = snippet_source(text, 240)
    assert cut.endswith(" …") and len(cut) < len(text)
    body = cut.removesuffix(" …")
    whole = {(s.start, s.end) for s in spans(text)}
    for s in spans(body):  # every formula in the snippet is one of the text's, whole
        assert (s.start, s.end) in whole
    assert body.count("$") % 2 == 0


def test_script_json_cannot_close_its_script():
    out = script_json({"html": "</script><script>alert(1)</script><!--"})
    assert "</script" not in out and "<!--" not in out
    assert json.loads(out)["html"].startswith("</script>")


def test_judge_facts_count_the_first_shown_wins_and_the_order_checks():
    j = pl.DataFrame(
        {
            "query": ["q"] * 5,
            "a": ["x", "x", "y", "x", "y"],
            "b": ["y", "z", "z", "z", "z"],
            "shown_first": ["x", "z", "z", "x", "y"],
            "winner": ["x", "z", "y", None, "y"],
            "swapped_winner": [None, "x", "y", None, None],
        }
    )
    f = judge_facts(j)["q"]
    assert f == {"judgments": 5, "decided": 4, "first_won": 3, "rechecked": 2, "flipped": 1}
    # flip one winner: the lean and the order check move
    f2 = judge_facts(j.with_columns(pl.Series("winner", ["y", "z", "y", None, "y"])))["q"]
    assert f2["first_won"] == 2


def test_more_games_narrow_the_grade_posterior():
    rng = np.random.default_rng(3)
    truth = np.linspace(-2, 2, 8)

    def posterior(games: int) -> GradePosterior:
        pairs = []
        for _ in range(games):
            i, k = rng.choice(8, 2, replace=False)
            win = rng.random() < 1 / (1 + np.exp(truth[k] - truth[i]))
            pairs.append((i, k) if win else (k, i))
        return grade_posteriors([(8, pairs)])[0]

    def width(post: GradePosterior) -> float:
        lo, hi = grade_intervals(post, np.random.default_rng(0))
        assert (0 <= lo).all() and (lo <= hi).all() and (hi <= 5).all()
        return float((hi - lo).mean())

    many = posterior(2000)
    assert 0 < width(many) < width(posterior(20)) / 2 <= 5
    # the interval holds the published grade (the fit, rescaled) for nearly every candidate
    lo, hi = grade_intervals(many, np.random.default_rng(1))
    grade = rescale(many.theta)
    assert ((lo - 1e-9 <= grade) & (grade <= hi + 1e-9)).mean() >= 0.75


def test_a_query_page_holds_each_systems_ranking_and_each_judgment_once():
    cands, grades = ["c0", "c1", "c2", "c3"], [1.0, 5.0, 0.0, 3.0]
    runs = pl.DataFrame(
        {
            "retriever": ["a", "b", "c"],
            "setting": ["s", "s", "s"],
            "ndcg": [0.9, 0.5, None],
            "scores": [[0.1, 0.9, 0.0, 0.5], [0.9, 0.1, 0.5, 0.5], None],
        }
    )
    judgments = pl.DataFrame(
        {
            "query": ["q", "q"],
            "round": [1, 2],
            "a": ["c0", "c1"],
            "b": ["c1", "c3"],
            "shown_first": ["c1", "c3"],
            "winner": ["c1", None],
            "p_first": [0.8, 0.5],
            "raw": ['{"answer": 1}', None],
            "error": [None, "no answer"],
        }
    )
    data = query_data(
        "q",
        cands,
        grades,
        [text_html("$x$")] * 4,
        None,
        judgments,
        runs,
        {"c3": "queries/3.html"},
    )
    systems = data["systems"]["s"]
    assert systems["a"]["order"] == [1, 3, 0, 2] and systems["c"] is None
    assert systems["b"]["order"] == [0, 2, 3, 1]  # equal scores keep the candidates' order
    assert data["judgments"] == [[1, 0, 1, 1, 1, 0.8, '{"answer": 1}', None],
                                 [2, 1, 3, 3, -1, 0.5, "error: no answer", None]]  # fmt: skip
    assert data["candidates"][3]["page"] == "../queries/3.html"
    assert "<math" in data["candidates"][0]["html"]
    # the page's ideal DCG is the metric's: a's nDCG from its order equals ndcg_at_k
    g = gains(np.array(grades), "exponential")
    dcg = sum(g[k] / np.log2(r + 2) for r, k in enumerate(systems["a"]["order"][:10]))
    assert dcg / data["ideal_dcg"] == pytest.approx(
        ndcg_at_k(np.array([0.1, 0.9, 0.0, 0.5]), np.array(grades), 10, "exponential")
    )
    assert ranking([0.2, 0.2, 0.3]) == [2, 0, 1]
    assert judgment_rows(None, {}) == []


def state(label, grades, board, seed=1) -> BuildState:
    g = pl.DataFrame(
        [(q, c, v, grp) for (q, c, grp), v in grades.items()],
        schema={"query_id": pl.String, "candidate_id": pl.String, "grade": pl.Float64,
                "group": pl.String}, orient="row",
    )  # fmt: skip
    b = pl.DataFrame(
        [(s, r, v, 1) for (s, r), v in board.items()],
        schema={"setting": pl.String, "retriever": pl.String, "score": pl.Float64,
                "tie_group": pl.Int64}, orient="row",
    )  # fmt: skip
    return BuildState(label, g, b, {"seed": seed})


def random_build(rng, label, seed, queries=6, systems=5):
    grades = {
        (f"q{q}", f"d{c}", ("topic_only", "summary_only", "both")[c % 3]): float(rng.uniform(0, 5))
        for q in range(queries)
        for c in range(q, q + 6)
    }
    board = {(s, f"r{r}"): float(rng.uniform(0.3, 0.9)) for s in ("x", "y") for r in range(systems)}
    return state(label, grades, board, seed)


def test_diff_reports_what_a_recomputation_finds():
    rng = np.random.default_rng(0)
    old = random_build(rng, "old", 1)
    new = random_build(rng, "new", 2, queries=7)
    # a move a refit cannot make (1e-6) counts; a rounding difference (1e-12) does not
    nudged = [1e-6, 1e-12] + [0.0] * (new.grades.height - 2)
    new.grades = new.grades.with_columns(
        pl.when(pl.int_range(pl.len()) < 2)
        .then(old.grades["grade"].extend(pl.Series([0.0] * (new.grades.height - old.grades.height)))
              + pl.Series(nudged))
        .otherwise(pl.col("grade"))
        .alias("grade")
    )  # fmt: skip
    d = diff_builds(old, new)
    # recomputed here, from the two tables alone
    og = {(q, c): v for q, c, v, _ in old.grades.iter_rows()}
    ng = {(q, c): v for q, c, v, _ in new.grades.iter_rows()}
    both = og.keys() & ng.keys()
    assert d.compared == len(both)
    assert d.moved.height == sum(abs(og[k] - ng[k]) > 1e-9 for k in both)
    moved = set(zip(d.moved["query_id"], d.moved["candidate_id"], strict=True))
    assert ("q0", "d0") in moved and ("q0", "d1") not in moved
    assert d.queries_added == ["q6"] and d.queries_removed == []
    assert d.facts == {"seed": (1, 2)}
    for s in d.settings:
        a = dict(
            old.board.filter(pl.col("setting") == s.setting)
            .select("retriever", "score")
            .iter_rows()
        )
        b = dict(
            new.board.filter(pl.col("setting") == s.setting)
            .select("retriever", "score")
            .iter_rows()
        )
        pairs = list(combinations(sorted(a), 2))
        concordant = sum((a[x] - a[y]) * (b[x] - b[y]) > 0 for x, y in pairs)
        discordant = sum((a[x] - a[y]) * (b[x] - b[y]) < 0 for x, y in pairs)
        assert s.tau == pytest.approx((concordant - discordant) / len(pairs))
        assert len(s.flipped) == discordant
    groups = dict(d.by_group.select("group", "moved").iter_rows())
    assert sum(groups.values()) == d.moved.height
    text = "\n".join(diff_lines(d))
    assert (
        f"grades: {d.moved.height} of {d.compared} moved" in text and "changed seed: 1 -> 2" in text
    )


def test_diff_of_a_build_with_itself_says_nothing_moved(tmp_path, capsys):
    rng = np.random.default_rng(1)
    build = random_build(rng, "a", 1)
    d = diff_builds(build, build)
    assert d.nothing_moved and d.moved.height == 0
    assert all(s.tau == pytest.approx(1.0) and not s.flipped for s in d.settings)
    # the command line reads snapshots and says the same
    build.write(tmp_path / "a")
    flipped = build.board.with_columns(
        pl.when(pl.col("retriever") == "r0").then(2.0).otherwise(pl.col("score")).alias("score")
    )
    BuildState("b", build.grades, flipped, build.facts).write(tmp_path / "b")
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("nothing moved: the same queries, grades and board")
    )
    assert main(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["moved_count"] == 0 and not out["nothing_moved"]
    assert all(all(f["a"] == "r0" or f["b"] == "r0" for f in s["flipped"]) for s in out["settings"])


def test_the_explorer_remembers_the_builds_it_showed(tmp_path):
    rng = np.random.default_rng(2)
    history = tmp_path / "builds"
    first, second = random_build(rng, "one", 1), random_build(rng, "two", 2)
    assert remember(history, first)[0] is None  # nothing earlier
    assert remember(history, first)[0] is None  # the same build again: still nothing else
    previous, _ = remember(history, second)
    assert previous is not None and previous.fingerprint() == first.fingerprint()
    assert previous.label == f"build 1 ({first.fingerprint()})"  # no local path
    previous, _ = remember(history, second)  # shown again: still compared with the first
    assert previous is not None and previous.fingerprint() == first.fingerprint()
    for k in range(8):
        remember(history, random_build(rng, f"b{k}", 10 + k))
    assert len([p for p in history.iterdir() if p.is_dir()]) <= 6
