"""Metrics, the exchange format, the baselines, the registry and `saber evaluate`."""

import itertools
import json
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saber_assets.benchmark.data import (
    DOC_SCHEMA,
    QUERY_SCHEMA,
    Benchmark,
    BenchmarkFormatError,
)
from saber_assets.cli import main
from saber_assets.leaderboard.scores import score_table
from saber_assets.retrievers.base import RetrieverFailed
from saber_assets.retrievers.entries import RegistryError
from saber_assets.retrievers.registry import build_retriever, load_registry
from saber_assets.retrievers.tokenize import formula_tokens, math_tokens, plain_tokens
from saber_assets.runs.evaluate import evaluate
from saber_assets.runs.metrics import (
    bootstrap_ci,
    condensed_ndcg,
    ndcg_at_k,
    recall_of_top,
    summarize,
)

# ---------------------------------------------------------------------------------- metrics


def test_ndcg_hand_computed_with_fractional_grades_and_ties():
    rel = [0.5, 3.2, 0.0, 4.7]
    scores = [2.0, 2.0, 1.0, 0.5]  # tie between candidates 0 and 1: the earlier listed ranks first
    k = 3
    gain = [2**r - 1 for r in rel]
    dcg = gain[0] / math.log2(2) + gain[1] / math.log2(3) + gain[2] / math.log2(4)
    ideal = sorted(gain, reverse=True)
    idcg = ideal[0] / math.log2(2) + ideal[1] / math.log2(3) + ideal[2] / math.log2(4)
    assert ndcg_at_k(scores, rel, k, ties="stable") == pytest.approx(dcg / idcg)
    lin = (0.5 + 3.2 / math.log2(3) + 0) / (4.7 + 3.2 / math.log2(3) + 0.5 / 2)
    assert ndcg_at_k(scores, rel, k, gain="linear", ties="stable") == pytest.approx(lin)
    # default: the tied pair shares its mean gain over the two ranks it occupies
    avg = (gain[0] + gain[1]) / 2 * (1 + 1 / math.log2(3)) + gain[2] / math.log2(4)
    assert ndcg_at_k(scores, rel, k) == pytest.approx(avg / idcg)
    with pytest.raises(ValueError, match="ties must be"):
        ndcg_at_k(scores, rel, ties="random")
    # only the order matters, not the score values
    assert ndcg_at_k([1, 2, 3, 4], rel, 10) == ndcg_at_k([-9, 0, 1, 7], rel, 10)
    assert ndcg_at_k([0, 0, 0, 0], [0, 0, 0, 0]) == 0.0  # no relevant candidate: 0 by definition
    assert ndcg_at_k([4, 3, 2, 1], [5, 4, 3, 2]) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="gain must be"):
        ndcg_at_k([1], [1], gain="cubic")


def test_tied_scores_give_the_expected_ndcg_whatever_the_candidate_order():
    rng = np.random.default_rng(3)
    rel = rng.uniform(0, 5, 30)
    k = 10
    gains = 2.0**rel - 1
    ideal = np.sort(gains)[::-1][:k] / np.log2(np.arange(2, k + 2))
    closed_form = gains.mean() * np.sum(1 / np.log2(np.arange(2, k + 2))) / ideal.sum()
    flat = np.zeros(30)
    values = {ndcg_at_k(flat, rel[p], k) for p in (rng.permutation(30) for _ in range(20))}
    assert len({round(v, 12) for v in values}) == 1
    assert values.pop() == pytest.approx(closed_form)
    # stable ties depend on the listed order (and must not reorder ties longer than 16)
    stable = [
        ndcg_at_k(flat, rel[p], k, ties="stable") for p in (rng.permutation(30) for _ in range(5))
    ]
    assert len({round(v, 9) for v in stable}) > 1
    first_k = 2.0 ** rel[:k] - 1
    assert ndcg_at_k(flat, rel, k, ties="stable") == pytest.approx(
        np.sum(first_k / np.log2(np.arange(2, k + 2))) / ideal.sum()
    )
    # partial ties: two groups, k cutting through the second
    scores = np.r_[np.full(4, 2.0), np.full(26, 1.0)]
    top, rest = gains[:4].mean(), gains[4:].mean()
    disc = 1 / np.log2(np.arange(2, k + 2))
    assert ndcg_at_k(scores, rel, k) == pytest.approx(
        (top * disc[:4].sum() + rest * disc[4:].sum()) / ideal.sum()
    )
    # k larger than the list
    assert ndcg_at_k([3, 2, 1], [1.0, 2.0, 0.0], k=50) == ndcg_at_k([3, 2, 1], [1.0, 2.0, 0.0], k=3)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.floats(0, 5, allow_nan=False)), min_size=1, max_size=6
    ),
    st.integers(1, 8),
    st.sampled_from(["exponential", "linear"]),
)
def test_ndcg_average_ties_equal_the_mean_over_every_order_of_the_ties(items, k, gain):
    """The oracle: every listing order of the candidates, scored with stable ties, averaged.
    Coarse integer scores make tie groups of every size; k runs past the list's length."""
    scores = [float(s) for s, _ in items]
    rel = [r for _, r in items]
    orders = list(itertools.permutations(range(len(items))))
    want = np.mean(
        [
            ndcg_at_k([scores[i] for i in p], [rel[i] for i in p], k, gain, ties="stable")
            for p in orders
        ]
    )
    got = ndcg_at_k(scores, rel, k, gain)
    assert got == pytest.approx(want, abs=1e-12)
    assert 0.0 <= got <= 1.0 + 1e-12
    assert got == ndcg_at_k(scores, rel, min(k, len(items)), gain)  # k past the list: no change


def test_ndcg_defaults_option_strings_from_a_config_and_shape_errors():
    rng = np.random.default_rng(5)
    scores, rel = rng.random(14), rng.uniform(0, 5, 14)
    assert ndcg_at_k(scores, rel) == ndcg_at_k(scores, rel, 10, "exponential", "average")
    assert ndcg_at_k(scores, rel, 10) != ndcg_at_k(scores, rel, 11)
    assert ndcg_at_k(scores, rel, 10) != ndcg_at_k(scores, rel, 9)
    # option strings read from a config file are equal to the literals, not the same objects
    exp, lin, stable = json.loads('["exponential", "linear", "stable"]')
    assert ndcg_at_k(scores, rel, 10, exp) == ndcg_at_k(scores, rel, 10, "exponential")
    assert ndcg_at_k(scores, rel, 10, lin) == ndcg_at_k(scores, rel, 10, "linear")
    tied = np.round(scores, 1)
    assert ndcg_at_k(tied, rel, 10, ties=stable) == ndcg_at_k(tied, rel, 10, ties="stable")
    for bad in ("log", "lin", "z"):  # sorting after or before "linear" is still not "linear"
        with pytest.raises(ValueError, match="gain must be"):
            ndcg_at_k(scores, rel, gain=bad)
    with pytest.raises(ValueError, match="ties must be"):
        ndcg_at_k(scores, rel, ties="zzz")
    with pytest.raises(ValueError, match="^3 scores for 2 relevance values$"):
        ndcg_at_k([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="^2 scores for 3 relevance values$"):
        ndcg_at_k([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="NaN"):
        ndcg_at_k([1, float("nan")], [1, 2])
    assert ndcg_at_k([], []) == 0.0
    assert ndcg_at_k([2, 1], [0.1, 0.05]) == 1.0  # small grades: an ideal DCG below 1 still counts


def test_bootstrap_summary_and_recall_defaults_and_edges():
    v = np.random.default_rng(2).random(25)
    assert bootstrap_ci(v) == bootstrap_ci(v, 1000, 0, 0.95)
    assert bootstrap_ci(v) not in (bootstrap_ci(v, 1001, 0), bootstrap_ci(v, 1000, 1))
    assert bootstrap_ci([0.4]) == (0.4, 0.4)  # one query: every resample is that query
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    doms = [["A"]] * 25
    assert summarize(v, doms, ["A"]) == summarize(v, doms, ["A"], 1000, 0)
    assert summarize(v, doms, ["A"])["A"]["low"] == bootstrap_ci(v)[0]
    cands, rel = list(range(20)), list(np.linspace(0, 5, 20))
    ranked = cands[::-1]  # best first
    assert condensed_ndcg(ranked, cands, rel) == condensed_ndcg(ranked, cands, rel, 10)
    assert condensed_ndcg(cands, cands, rel) != condensed_ndcg(cands, cands, rel, 11)
    with pytest.raises(ValueError):
        condensed_ndcg(ranked, cands, rel[:-1])  # candidates and grades must align
    # recall: the default top 5 within the first 100
    far = list(range(100, 199)) + [19, 18, 17, 16, 15, 14]
    assert recall_of_top(far, cands, rel) == recall_of_top(far, cands, rel, 5, 100) == 0.2
    assert recall_of_top(ranked[:4] + [0], cands, rel) == 0.8
    assert recall_of_top([1, 2], [], []) == 0.0


def test_per_domain_means_with_multi_domain_queries():
    values = [1.0, 0.5, 0.0]
    domains = [["Algebra"], ["Algebra", "Geometry"], ["Geometry"]]
    s = summarize(values, domains, ["Algebra", "Geometry", "Number Theory"], resamples=50, seed=1)
    assert s["overall"]["mean"] == pytest.approx(0.5)
    assert s["Algebra"]["mean"] == pytest.approx(0.75) and s["Geometry"]["mean"] == pytest.approx(
        0.25
    )
    assert s["Number Theory"]["queries"] == 0 and math.isnan(s["Number Theory"]["mean"])


def test_bootstrap_is_seeded():
    v = np.random.default_rng(0).random(40)
    assert bootstrap_ci(v, 500, 3) == bootstrap_ci(v, 500, 3) != bootstrap_ci(v, 500, 4)
    lo, hi = bootstrap_ci(v, 2000, 0)
    assert lo < v.mean() < hi


def test_bootstrap_interval_is_the_95_percent_quantile_of_resampled_means():
    v = np.random.default_rng(1).random(37)
    rng = np.random.default_rng(9)
    means = v[rng.integers(0, len(v), size=(800, len(v)))].mean(axis=1)
    want = np.quantile(means, [0.025, 0.975])
    assert bootstrap_ci(v, 800, 9) == pytest.approx(tuple(want), rel=1e-12)
    assert bootstrap_ci(v, 800, 9, level=0.9) == pytest.approx(
        tuple(np.quantile(means, [0.05, 0.95])), rel=1e-12
    )


def test_recall_counts_exactly_depth_documents():
    cands, rel = [7, 8], [5.0, 4.0]
    ranked = list(range(100, 199)) + [7, 8]  # 99 others, then the two best at ranks 100 and 101
    assert recall_of_top(ranked, cands, rel, top=2, depth=100) == 0.5
    assert recall_of_top(ranked, cands, rel, top=2, depth=101) == 1.0
    assert recall_of_top(ranked, cands, rel, top=2, depth=99) == 0.0


def test_full_corpus_metrics():
    cands, rel = [10, 11, 12], [1.0, 5.0, 0.0]
    # unrated documents (1, 2) are removed before scoring: same as ranking 11 > 10 > 12
    assert condensed_ndcg([1, 10, 2, 11, 12], cands, rel, 10) == pytest.approx(
        ndcg_at_k([3, 2, 1], rel, 10)
    )
    assert condensed_ndcg([1, 10, 2, 11, 12], cands, rel, 10) < 1.0
    # a candidate the system never returned ranks after the returned ones
    assert condensed_ndcg([12], cands, rel, 10) == pytest.approx(
        ndcg_at_k([3, 2, 1], [0.0, 1.0, 5.0], 10)
    )
    assert condensed_ndcg([11, 10, 12], cands, rel) == pytest.approx(1.0)
    assert recall_of_top([11, 3, 4], cands, rel, top=2, depth=2) == 0.5


# --------------------------------------------------------------------------- exchange format


def toy_benchmark() -> Benchmark:
    docs = pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(6)],
            "problem": [
                "Find all primes $p$ such that $p^2+2$ is prime.",
                "Compute the area of a triangle with sides $3,4,5$.",
                "How many ways to arrange the letters of BANANA?",
                "Solve $x^2-5x+6=0$ for real $x$.",
                "Show that $q^2+2$ is prime only for the prime $q=3$.",
                "Evaluate $\\int_0^1 x^2\\,dx$.",
            ],
            "solution": [
                "Mod 3.",
                "Heron.",
                "Multinomial.",
                "Factor.",
                "Work modulo 3: squares of primes.",
                "Power rule.",
            ],
        }
    )
    queries = pl.DataFrame(
        [
            {
                "id": "q0",
                "problem": "For which primes $r$ is $r^2+2$ also a prime?",
                "solution": "Consider squares modulo 3.",
                "candidates": [1, 2, 3, 4, 5],
                "relevance_scores": [0.0, 0.3, 0.5, 5.0, 0.0],
                "domains": ["Number Theory"],
            }
        ],
        schema=QUERY_SCHEMA,
    )
    return Benchmark(queries, docs, {"name": "toy"})


def test_exchange_round_trip_and_validation(tmp_path):
    bench = toy_benchmark()
    back = Benchmark.read(bench.write(tmp_path / "b"))
    assert (
        back.queries.equals(bench.queries)
        and back.documents.equals(bench.documents)
        and back.manifest == {"name": "toy"}
    )
    cases = {
        "1 candidates but 2 relevance scores": {
            "candidates": [[1]],
            "relevance_scores": [[1.0, 2.0]],
        },
        "candidates holds document indices outside": {
            "candidates": [[9]],
            "relevance_scores": [[1.0]],
        },
        r"relevance_scores\[0\] = nan is not a finite number": {
            "candidates": [[1]],
            "relevance_scores": [[float("nan")]],
        },
        r"query 'q0' \(row 0\): relevance_scores\[1\] = 5.000000000000001 \(candidate 2\) lies outside \[0, 5\]": {
            "candidates": [[1, 2]],
            "relevance_scores": [[1.0, 5.000000000000001]],
        },
        "candidates lists document 1 more than once": {
            "candidates": [[1, 1]],
            "relevance_scores": [[1.0, 2.0]],
        },
    }
    for msg, change in cases.items():
        bad = Benchmark(
            bench.queries.with_columns(
                **{k: pl.Series(v, dtype=QUERY_SCHEMA[k]) for k, v in change.items()}
            ),
            bench.documents,
        )
        with pytest.raises(BenchmarkFormatError, match=msg):
            Benchmark.read(bad.write(tmp_path / f"case{len(msg)}"))
    (tmp_path / "missing").mkdir()
    with pytest.raises(BenchmarkFormatError, match="missing queries.parquet"):
        Benchmark.read(tmp_path / "missing")
    nocol = tmp_path / "nocol"
    Benchmark(bench.queries.drop("domains"), bench.documents).write(nocol)
    with pytest.raises(BenchmarkFormatError, match=r"lacks columns \['domains'\]"):
        Benchmark.read(nocol)


def _with(bench: Benchmark, docs: pl.DataFrame | None = None, **change) -> Benchmark:
    cols = {k: pl.Series([v], dtype=QUERY_SCHEMA[k]) for k, v in change.items()}
    return Benchmark(bench.queries.with_columns(**cols), bench.documents if docs is None else docs)


def test_exchange_validation_names_the_first_fault_exactly(tmp_path):
    bench = toy_benchmark()
    big_docs = pl.DataFrame({k: [f"{k}{i}" for i in range(300)] for k in DOC_SCHEMA})
    # accepted: index 0 and the last index, grades 0 and 5, 300 distinct candidates
    _with(bench, candidates=[0, 5], relevance_scores=[0.0, 5.0]).validate()
    many = list(range(300))
    _with(bench, big_docs, candidates=many, relevance_scores=[2.5] * 300).validate()
    refused = [
        ({"candidates": None}, "field 'candidates' is null"),
        ({"relevance_scores": None}, "field 'relevance_scores' is null"),
        ({"candidates": [1, 2], "relevance_scores": [1.0]}, "2 candidates but 1 relevance"),
        ({"candidates": [-1], "relevance_scores": [1.0]}, r"outside \[0, 6\): \[-1\]"),
        ({"candidates": [6], "relevance_scores": [1.0]}, r"outside \[0, 6\): \[6\]"),
        (
            {"candidates": [0, 9, 1, 10, 11, 12, 13, 14], "relevance_scores": [1.0] * 8},
            r"outside \[0, 6\): \[9, 10, 11, 12, 13\]$",  # the first five only
        ),
        ({"candidates": [0, 1, 2], "relevance_scores": [1.0, None, float("inf")]}, r"\[1\] = None"),
        ({"candidates": [0, 1, 2], "relevance_scores": [1.0, -0.5, 7.0]}, r"\[1\] = -0.5 .*2 such"),
        ({"candidates": [1, 2, 2, 3, 3], "relevance_scores": [1.0] * 5}, "document 2 more than"),
    ]
    for change, msg in refused:
        with pytest.raises(BenchmarkFormatError, match=msg):
            _with(bench, **change).validate()
    # 300 candidates with 300 scores: lengths compared by value, not identity
    with pytest.raises(BenchmarkFormatError, match="document 7 more than once"):
        _with(bench, big_docs, candidates=[7] + many[:299], relevance_scores=[1.0] * 300).validate()
    # the manifest's domain list wins; without it, the queries' domains in order of appearance
    assert Benchmark(bench.queries, bench.documents, {"domains": ["A", "B"]}).domain_list() == [
        "A",
        "B",
    ]
    assert bench.domain_list() == ["Number Theory"]
    assert Benchmark(bench.queries.clear(), bench.documents).domain_list() == []
    # written into a directory that does not exist yet, and over an existing one
    bench.write(tmp_path / "new" / "deep")
    assert Benchmark.read(bench.write(tmp_path / "new" / "deep")).manifest == {"name": "toy"}
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "queries.parquet").write_bytes(b"not parquet")
    (tmp_path / "broken" / "documents.parquet").write_bytes(b"not parquet")
    with pytest.raises(BenchmarkFormatError, match="unreadable Parquet"):
        Benchmark.read(tmp_path / "broken")


# ------------------------------------------------------------------------------- baselines


def test_math_tokens_share_paths_under_renaming():
    a, b = set(formula_tokens("a^2+b^2=c^2")), set(formula_tokens("x^2+y^2=z^2"))
    paths_a = {t for t in a if t.startswith("path:")}
    assert paths_a and paths_a == {t for t in b if t.startswith("path:")}
    assert "sym:normal`a'" in a and "sym:normal`a'" not in b
    assert math_tokens("Let $x+1$ be odd.")[:3] == ["let", "be", "odd"]
    assert formula_tokens("\\frac{") == ("tex:frac",)  # unparseable: plain words, no crash
    assert plain_tokens("Find $x^2$!") == ["find", "x", "2"]


@pytest.mark.parametrize("name", [e.name for e in load_registry()])
def test_each_baseline_ranks_the_planted_document_first(name):
    from saber_assets.retrievers.registry import RetrieverResources

    bench = toy_benchmark()
    entries = load_registry()
    retriever = build_retriever(
        next(e for e in entries if e.name == name), RetrieverResources(entries=entries)
    )
    run = evaluate(retriever, bench, "statement-statement", k=10)
    scores = run["scores"][0].to_list()
    assert int(np.argmax(scores)) == 3, (
        name,
        scores,
    )  # candidate 3 = document d4, the renamed twin
    assert run["ndcg"][0] > 0.95
    assert run["full_recall_top5_at100"][0] == 1.0


class Flaky:
    name = "flaky"

    def score(self, query, docs):
        if "primes" in query:
            raise RetrieverFailed("engine crashed")
        return np.zeros(len(docs))


def test_retriever_failures_are_counted():
    bench = toy_benchmark()
    run = evaluate(Flaky(), bench, "full-full", full_corpus=False)
    assert run["failed"].to_list() == [True] and run["error"][0] == "engine crashed"
    rep = score_table(run, ["Number Theory"], resamples=20)
    assert rep["failed"][0] == 1 and rep["queries"][0] == 1 and rep["ndcg@10"][0] == 0.0


def test_the_score_columns_are_named_for_the_cut_off():
    from saber_assets.leaderboard.board import score_column
    from saber_assets.site.report import read_leaderboard

    bench = toy_benchmark()
    run = evaluate(Flaky(), bench, "full-full", k=5, full_corpus=False)
    rep = score_table(run, ["Number Theory"], resamples=20, k=5)
    assert {"ndcg@5", "ndcg@5_linear", "full_ndcg'@5"} <= set(rep.columns)
    assert not [c for c in rep.columns if c.endswith("@10") or "@10_" in c]
    assert score_column(rep) == "ndcg@5"
    board = rep.with_columns(pl.lit("flaky").alias("retriever"))
    assert "leads with nDCG@5 0.000" in read_leaderboard(board)
    with pytest.raises(ValueError, match="expected one nDCG@k column"):
        score_column(board.with_columns(pl.lit(1.0).alias("ndcg@10")))


def test_registry_validation(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("retrievers:\n  - {name: a, kind: bm25}\n  - {name: a, kind: tfidf}\n")
    with pytest.raises(RegistryError, match="duplicate retriever names \\['a'\\]"):
        load_registry(p)
    p.write_text("retrievers:\n  - {name: a, kind: nope}\n")
    with pytest.raises(RegistryError, match="unknown kind 'nope'"):
        load_registry(p)
    p.write_text("retrievers:\n  - {name: a, kind: bm25, params: {k3: 1}}\n")
    with pytest.raises(RegistryError, match="bad parameters"):
        load_registry(p)


def test_saber_evaluate_cli_json(tmp_path, capsys):
    toy_benchmark().write(tmp_path / "b")
    assert (
        main(
            [
                "evaluate",
                "bm25",
                "--benchmark",
                str(tmp_path / "b"),
                "--setting",
                "statement-full",
                "--json",
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["retriever"] == "bm25" and out["settings"][0]["setting"] == "statement-full"
    assert out["settings"][0]["ndcg@10"] > 0.95 and out["settings"][0]["failed"] == 0
    assert main(["evaluate", "nope", "--benchmark", str(tmp_path / "b")]) == 2
    assert "no retriever named 'nope'" in capsys.readouterr().err


def test_one_system_under_two_names_is_said_so():
    """A system whose nDCG on every query is another's (a re-ranker whose depth covers every
    candidate) is marked on the board and named in its words; one query scored otherwise and
    the mark goes."""
    from saber_assets.leaderboard.assemble import same_scores
    from saber_assets.leaderboard.board_markdown import same_scores_note

    def runs(rerank_q2: float):
        return pl.DataFrame(
            {
                "retriever": ["dense", "dense", "rerank", "rerank", "bm25", "bm25"],
                "setting": ["s"] * 6,
                "query_id": ["q1", "q2"] * 3,
                "ndcg": [0.9, 0.4, 0.9, rerank_q2, 0.2, 0.4],
            }
        )

    same = same_scores(runs(0.4))
    marks = dict(same.select("retriever", "same_scores_as").iter_rows())
    assert marks == {"bm25": None, "dense": "rerank", "rerank": "dense"}
    board = same.with_columns(pl.lit(0.5).alias("ndcg@10"))
    note = same_scores_note(board)
    assert note.startswith("**One system, two names:** in s, dense and rerank score every query")
    assert "bm25" not in note
    apart = same_scores(runs(0.41))  # one query scored otherwise
    assert apart["same_scores_as"].is_null().all()
    assert same_scores_note(apart) == ""
