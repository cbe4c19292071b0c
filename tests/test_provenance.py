"""Every leaderboard row says where it came from, has a stable id, and can be rerun by that id."""

from pathlib import Path

import polars as pl
import yaml

from saber_assets.benchmark.data import Benchmark
from saber_assets.cli import main
from saber_assets.config import load_config
from saber_assets.leaderboard.scores import score_table
from saber_assets.retrievers.entries import RetrieverEntry
from saber_assets.retrievers.registry import build_retriever
from saber_assets.runs.evaluate import evaluate
from saber_assets.runs.provenance import (
    PROVENANCE_COLUMNS,
    benchmark_id,
    provenance,
    row_id,
    with_provenance,
)

from .test_paper import sample_benchmark

BM25 = {
    "name": "bm25-ws",
    "kind": "bm25",
    "params": {"tokenizer": "whitespace", "method": "rank_bm25"},
}


def test_row_ids_change_with_what_changes_the_scores_only():
    bench = sample_benchmark(6, 10)
    bid = benchmark_id(bench)
    e = RetrieverEntry.model_validate(BM25)
    f = provenance(e, bid, code="c1")
    rid = row_id(f, e.name, "statement-full")
    assert rid == row_id(provenance(e, bid, code="c1"), e.name, "statement-full")  # stable
    assert rid != row_id(f, e.name, "full-full")
    # a description or meta does not change the scores, a parameter or the code does
    described = RetrieverEntry.model_validate({**BM25, "description": "x", "meta": {"notes": "y"}})
    assert row_id(provenance(described, bid, code="c1"), e.name, "statement-full") == rid
    k1 = RetrieverEntry.model_validate({**BM25, "params": {**BM25["params"], "k1": 1.2}})
    assert row_id(provenance(k1, bid, code="c1"), e.name, "statement-full") != rid
    assert row_id(provenance(e, bid, code="c2"), e.name, "statement-full") != rid
    # the benchmark's id is its content: one changed grade is another benchmark
    q = bench.queries.with_columns(
        pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.col("relevance_scores").list.eval(pl.element() * 0.5))
        .otherwise(pl.col("relevance_scores"))
    )
    assert benchmark_id(Benchmark(q, bench.documents, bench.manifest)) != bid
    assert benchmark_id(Benchmark(bench.queries, bench.documents, dict(bench.manifest))) == bid
    pulled = Benchmark(bench.queries, bench.documents, {"benchmark_id": "org/q@abc + org/d@def"})
    assert benchmark_id(pulled) == "org/q@abc + org/d@def"  # a pulled benchmark: its revisions
    # an API model's date is recorded but not part of the id (asked again another day: same row)
    api = RetrieverEntry.model_validate(
        {"name": "oa", "kind": "dense", "params": {"backend": "openai", "model": "m"}}
    )
    fa = provenance(api, bid, code="c1")
    assert fa["model_revision"].startswith("api:20")
    assert row_id({**fa, "model_revision": "api:1999-01-01"}, "oa", "statement-full") == row_id(
        fa, "oa", "statement-full"
    )
    # prompts are the envelope
    dense = {"name": "d", "kind": "dense", "params": {"backend": "cpu"}}
    prompted = {**dense, "params": {"backend": "cpu", "query_prompt": "query: "}}
    e1, e2 = (RetrieverEntry.model_validate(x) for x in (dense, prompted))
    assert provenance(e1, bid)["envelope_hash"] != provenance(e2, bid)["envelope_hash"]


def _leaderboard(tmp_path: Path, bench: Benchmark, entry: dict) -> tuple[Path, str]:
    cfg = load_config(None)
    e = RetrieverEntry.model_validate(entry)
    runs = evaluate(build_retriever(e), bench, "statement-full", 10, full_corpus=False)
    rep = score_table(runs, bench.domain_list(), cfg.leaderboard.bootstrap_resamples, cfg.seed)
    rep = with_provenance(rep, e.name, provenance(e, benchmark_id(bench)))
    board = rep.with_columns(pl.lit(e.name).alias("retriever"), pl.lit(e.kind).alias("kind"))
    assert set(PROVENANCE_COLUMNS) <= set(board.columns)
    path = tmp_path / "leaderboard.parquet"
    board.write_parquet(path)
    return path, board["row_id"][0]


def test_reproduce_reruns_one_row_and_says_whether_it_matches(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    bench = sample_benchmark(8, 15)
    bench_dir = bench.write(tmp_path / "bench")
    reg = tmp_path / "reg.yaml"
    reg.write_text(yaml.safe_dump({"retrievers": [BM25]}))
    board, rid = _leaderboard(tmp_path, bench, BM25)
    args = ["evaluate", "--reproduce", rid, "--leaderboard", str(board), "--benchmark",
            str(bench_dir), "--registry", str(reg)]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "reproduced: matches; provenance identical" in out
    # a recorded figure that the rerun does not give
    pl.read_parquet(board).with_columns(pl.col("ndcg@10") + 0.01).write_parquet(board)
    assert main(args) == 1
    assert "reproduced: differs (nDCG by -0.010000)" in capsys.readouterr().out
    # the entry changed since: said, field by field
    _leaderboard(tmp_path, bench, BM25)
    reg.write_text(
        yaml.safe_dump({"retrievers": [{**BM25, "params": {**BM25["params"], "k1": 1.2}}]})
    )
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "provenance changed: config_hash:" in out and "provenance changed" in out
    assert main([*args[:2], "nope", *args[3:]]) == 2
    assert "no row 'nope'" in capsys.readouterr().err
