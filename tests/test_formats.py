"""BEIR / TREC / MTEB export and import, and outside run files scored like our own runs."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark, BenchmarkFormatError
from saber_assets.benchmark.formats import export, integer_grade, read_beir, read_qrels
from saber_assets.cli import main
from saber_assets.leaderboard.scores import score_table
from saber_assets.runs.evaluate import evaluate
from saber_assets.runs.outside import evaluate_run, read_run, setting_of
from saber_assets.runs.trec import write_run

WORDS = "prime modulo square triangle area count arrange integral derivative root sum".split()


def synthetic_benchmark(seed: int = 0, n_docs: int = 40, n_queries: int = 12) -> Benchmark:
    rng = np.random.default_rng(seed)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS, k)) + f" $x^{int(rng.integers(9))}$"

    docs = pl.DataFrame(
        {
            "id": [f"doc:{i}" for i in range(n_docs)],
            "problem": [text(8) for _ in range(n_docs)],
            "solution": [text(12) for _ in range(n_docs)],
        }
    )
    queries = []
    for q in range(n_queries):
        cands = rng.choice(n_docs, 10, replace=False).tolist()
        rel = np.round(rng.uniform(0, 5, 10), 3).tolist()
        rel[0], rel[1] = 2.5, 5.0  # the rounding edge and the top grade
        queries.append(
            {
                "id": f"q:{q}",
                "problem": text(8),
                "solution": text(12),
                "candidates": cands,
                "relevance_scores": rel,
                "domains": [["Algebra"], ["Geometry"], ["Algebra", "Geometry"]][q % 3],
            }
        )
    return Benchmark(pl.DataFrame(queries, schema=QUERY_SCHEMA), docs, {"name": "synthetic"})


class Overlap:
    """Shared words between query and document (a stand-in outside system)."""

    name = "overlap"

    def score(self, query, docs):
        q = set(query.split())
        return np.array([len(q & set(d.split())) + 0.001 * len(d) for d in docs], dtype=float)


def test_integer_grades_round_half_up():
    assert [integer_grade(r) for r in (0.0, 0.49, 0.5, 2.5, 2.4999, 4.6, 5.0)] == [
        0, 0, 1, 3, 2, 5, 5,
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["beir", "mteb"])
def test_beir_and_mteb_round_trip_to_the_same_benchmark_and_scores(tmp_path, fmt):
    bench = synthetic_benchmark()
    files = export(bench, fmt, tmp_path / fmt, "statement-full")
    names = {p.relative_to(tmp_path / fmt).as_posix() for p in files}
    assert {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv"} <= names
    assert ("top_ranked.jsonl" in names) == (fmt == "mteb")
    back = read_beir(tmp_path / fmt)
    assert back.queries.equals(bench.queries) and back.documents.equals(bench.documents)
    assert back.manifest == bench.manifest
    # BEIR's integer qrels are the rounded ratings
    ints = read_qrels(tmp_path / fmt / "qrels" / "test.tsv")
    assert {r for _, _, r in ints} <= {0, 1, 2, 3, 4, 5}
    assert ints[0][2] == 3.0  # 2.5 rounds up
    # the texts follow the setting: documents carry solutions, queries do not
    doc = json.loads((tmp_path / fmt / "corpus.jsonl").read_text().splitlines()[0])
    query = json.loads((tmp_path / fmt / "queries.jsonl").read_text().splitlines()[0])
    assert bench.documents["solution"][0] in doc["text"]
    assert bench.queries["solution"][0] not in query["text"]
    if fmt == "mteb":
        top = [
            json.loads(x) for x in (tmp_path / fmt / "top_ranked.jsonl").read_text().splitlines()
        ]
        ids = bench.documents["id"].to_list()
        assert top[3]["corpus-ids"] == [ids[c] for c in bench.queries["candidates"][3]]
    for setting in ("statement-statement", "full-full"):
        a = evaluate(Overlap(), bench, setting)["ndcg"].to_list()
        b = evaluate(Overlap(), back, setting)["ndcg"].to_list()
        assert a == b


def test_trec_qrels_keep_the_continuous_ratings(tmp_path):
    bench = synthetic_benchmark(1)
    export(bench, "trec", tmp_path)
    cont = read_qrels(tmp_path / "qrels.continuous.txt")
    ids = bench.documents["id"].to_list()
    expected = [
        (q, ids[c], r)
        for q, cs, rs in bench.queries.select("id", "candidates", "relevance_scores").iter_rows()
        for c, r in zip(cs, rs, strict=True)
    ]
    assert cont == expected
    ints = read_qrels(tmp_path / "qrels.txt")
    assert [r for *_, r in ints] == [integer_grade(r) for *_, r in expected]


def _write_run(path, runs: dict[str, dict[str, dict[str, float]]]) -> None:
    """As an outside system would: ranked, one line per document, the tag naming the setting
    (several runs in one file)."""
    parts = []
    for tag, run in runs.items():
        write_run(path, run, tag)
        parts.append(path.read_text())
    path.write_text("".join(parts))


def test_a_saved_run_is_ranked_by_score_and_reads_back_as_written(tmp_path):
    run = {"q:2": {"d:a": 0.5, "d:b": 2.0, "d:c": 0.5}, "q:1": {"d:x": -1.0, "d:y": 1e-9}}
    write_run(tmp_path / "r.trec", run, "bm25-statement-statement")
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines == [
        "q:1 Q0 d:y 1 1e-09 bm25-statement-statement",
        "q:1 Q0 d:x 2 -1.0 bm25-statement-statement",
        "q:2 Q0 d:b 1 2.0 bm25-statement-statement",
        "q:2 Q0 d:a 2 0.5 bm25-statement-statement",  # a tie keeps the order given
        "q:2 Q0 d:c 3 0.5 bm25-statement-statement",
    ]
    assert read_run(tmp_path / "r.trec") == {"bm25-statement-statement": run}
    assert [p.name for p in tmp_path.iterdir()] == ["r.trec"]


def test_an_outside_run_scores_exactly_like_the_retriever_that_made_it(tmp_path):
    bench = synthetic_benchmark(2)
    ids = bench.documents["id"].to_list()
    runs, ours = {}, []
    for setting in ("statement-statement", "statement-full"):
        df = evaluate(Overlap(), bench, setting, full_corpus=False)
        ours.append(df)
        runs[f"overlap-{setting}"] = {
            q: {ids[c]: s for c, s in zip(cands, scores, strict=True)}
            for q, cands, scores in zip(
                df["query_id"], bench.queries["candidates"], df["scores"], strict=True
            )
        }
    _write_run(tmp_path / "run.trec", runs)
    read = read_run(tmp_path / "run.trec")
    assert set(read) == set(runs)
    theirs = [
        evaluate_run(run, bench, setting_of(tag, None), full_corpus=False)
        for tag, run in read.items()
    ]
    for a, b in zip(ours, theirs, strict=True):
        assert a["ndcg"].to_list() == b["ndcg"].to_list()
    domains = bench.domain_list()
    cols = ["setting", "queries", "failed", "ndcg@10", "ci_low", "ci_high", *domains]
    assert (
        score_table(pl.concat(ours), domains)
        .select(cols)
        .equals(score_table(pl.concat(theirs), domains).select(cols))
    )  # the same metric and the same seeded CIs (only the latency differs)
    # the CLI: the same numbers, both settings from one file
    bench.write(tmp_path / "bench")
    assert main(["evaluate", "--run", str(tmp_path / "run.trec"), "--benchmark",
                 str(tmp_path / "bench"), "--json", "--no-full-corpus"]) == 0  # fmt: skip


def test_outside_run_gaps_are_failures_and_counted(tmp_path, capsys):
    bench = synthetic_benchmark(3)
    ids = bench.documents["id"].to_list()
    cands = bench.queries["candidates"][0]
    run = {"q:0": {ids[c]: float(10 - k) for k, c in enumerate(cands[:7])}}  # 3 candidates unlisted
    df = evaluate_run(run, bench, "statement-full")
    first = df.row(0, named=True)
    assert first["doc_failures"] == 3 and not first["failed"]
    assert first["scores"][7:] == [min(first["scores"][:7]) - 1.0] * 3
    assert df["failed"].sum() == bench.queries.height - 1
    assert df.row(1, named=True)["error"] == "the run has no ranking for this query"
    assert first["full_ndcg_prime"] is not None and first["full_recall_top5_at100"] is not None
    # malformed run files name their line
    (tmp_path / "bad.trec").write_text("q:0 Q0 doc:1 1 0.5 tag\nq:0 Q0 doc:2 2 high tag\n")
    with pytest.raises(BenchmarkFormatError, match="line 2: score 'high'"):
        read_run(tmp_path / "bad.trec")
    (tmp_path / "bad.trec").write_text("q:0 doc:1 0.5\n")
    with pytest.raises(BenchmarkFormatError, match="line 1: expected"):
        read_run(tmp_path / "bad.trec")
    # export via the CLI
    bench.write(tmp_path / "bench")
    assert main(["export", "--format", "beir", str(tmp_path / "beir"), "--benchmark",
                 str(tmp_path / "bench")]) == 0  # fmt: skip
    assert read_beir(tmp_path / "beir").queries.equals(bench.queries)
    assert "beir (statement-full)" in capsys.readouterr().out
