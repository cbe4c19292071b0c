"""leaderboard stage: the leaderboard over every registered retriever's runs."""

import json

import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from saber_assets.benchmark.data import Benchmark
from saber_assets.contamination.matches import audited_items, declared_training, own_matched_queries
from saber_assets.io_managers import refresh_warehouse
from saber_assets.leaderboard.assemble import Made, board_of, separable_pairs
from saber_assets.leaderboard.board import MARKDOWN, TABLE_CSV
from saber_assets.leaderboard.board_markdown import board_text
from saber_assets.leaderboard.contamination_columns import (
    contamination_columns,
    contamination_paragraph,
)
from saber_assets.leaderboard.plots import board_chart, pvalue_heatmap
from saber_assets.leaderboard.rows import entry_rows
from saber_assets.leaderboard.scores import score_table
from saber_assets.lib.declare import stage_asset
from saber_assets.lib.metadata import figure_markdown, markdown_table, stage_metadata
from saber_assets.outputs import write_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.discovery import registry_for
from saber_assets.retrievers.registry import unavailable_reason
from saber_assets.runs.evaluate import with_ties
from saber_assets.runs.files import stored_runs
from saber_assets.runs.provenance import SCORING_CODE, benchmark_id
from saber_assets.versions import code_digest
from saber_resources.stores import StoresResource
from saber_resources.warehouse import Warehouse


@stage_asset(
    reads=(
        "seed",
        "leaderboard",
        "contamination.exclude_own_matches",
        "contamination.top_candidates",
    ),
    kinds={"duckdb", "polars"},
    deps=["retriever_runs", "retriever_registry", "contamination", "own_candidate_matches"],
)
def leaderboard(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    warehouse: Warehouse,
    stores: StoresResource,
) -> MaterializeResult:
    """One row per retriever × setting: overall and per-domain nDCG@10 with 95% CIs, failures,
    the full-corpus track and latency. Retrievers removed from the registry keep their run files
    but leave the board."""
    cfg = pipeline.load()
    entries = registry_for(cfg, stores.db())
    bench = Benchmark.read(pipeline.outputs().evaluation_benchmark)
    excluded = (
        own_matched_queries(pipeline.outputs().contamination)
        if cfg.contamination.exclude_own_matches
        else set()
    )
    tables, all_runs = entry_tables(cfg, entries, bench, pipeline.outputs(), excluded,
                                    context.log.warning)  # fmt: skip
    lb, manifest, domains = cfg.leaderboard, bench.manifest, bench.domain_list()
    if not tables and bench.queries.height == 0:
        context.log.warning(
            "the benchmark has no queries: the leaderboard is empty (too few viable queries: see relevance_thresholds)"
        )
        return MaterializeResult(
            metadata={**stage_metadata(0), "warning": "the benchmark has no queries"}
        )
    if not tables:
        raise ValueError("no retriever has scored any query: materialise retriever_runs first")
    runs_dir = pipeline.outputs().runs
    with_runs = (
        sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    )
    made = board_of(tables, all_runs, bench, lb, cfg.seed, excluded, with_runs)
    if made.no_joint:
        context.log.warning(f"no joint intervals: {made.no_joint}")
    out = pipeline.outputs().leaderboard
    made.board.write(out)
    refresh_warehouse(warehouse, context)
    separable = separable_pairs(made.board.tests)
    text = board_text(made.board.table, domains, made.board.metric, manifest, separable,
                      made.no_joint)  # fmt: skip
    write_whole(out / MARKDOWN, text.document)
    return MaterializeResult(
        metadata=board_metadata(made, text, separable, out, manifest, len(excluded), lb.ties)
    )


def entry_tables(cfg, entries, bench: Benchmark, outputs, excluded: set[str], warn):
    """(each entry's board rows, each entry's runs): the runs under the board's tie rule, the
    excluded queries left out, the contamination and origin columns added; an entry with no
    runs, or runs without a query, is said (``warn``) and left off."""
    lb, domains = cfg.leaderboard, bench.domain_list()
    relevance = bench.relevance()
    bench_id, code = benchmark_id(bench), code_digest(SCORING_CODE)
    declared, audits = declared_training(entries), audited_items(outputs.contamination)

    def rescore(runs: pl.DataFrame) -> pl.DataFrame:
        return score_table(runs, domains, lb.bootstrap_resamples, cfg.seed, k=lb.k)

    tables, all_runs = [], []
    for e in entries:
        runs = stored_runs(outputs.runs, [e.name])
        if runs.is_empty():
            why = unavailable_reason(e, entries)
            warn(
                f"no runs for {e.name!r}: " + (f"it cannot run here ({why})" if why else "not yet")
            )
            continue
        runs = with_ties(runs, relevance, lb.k, lb.ties)
        if excluded:
            runs = runs.filter(~pl.col("query_id").is_in(sorted(excluded)))
        all_runs.append(runs)

        def extra_columns(rep: pl.DataFrame, e=e, runs=runs) -> pl.DataFrame:
            rep = rep.join(
                contamination_columns(
                    rep, runs, bench, declared[e.name], audits, cfg.contamination.top_candidates,
                    rescore,
                ),
                on="setting",
            )  # fmt: skip
            gone = e.discovered is not None and e.discovered.status == "gone"
            return rep.with_columns(
                pl.lit(e.origin).alias("origin"),
                # a discovered model that left its server keeps its rows, flagged
                pl.lit(e.discovered.last_seen if gone else None, dtype=pl.String).alias(
                    "gone_last_seen"
                ),
            )

        rep = entry_rows(
            e, runs, domains, bench_id, resamples=lb.bootstrap_resamples, seed=cfg.seed, k=lb.k,
            code=code, columns=extra_columns,
        )  # fmt: skip
        if rep.is_empty():
            warn(f"{e.name!r}: its runs hold no query (the benchmark has no query in any domain)")
            continue
        tables.append(
            rep.with_columns(pl.lit(e.name).alias("retriever"), pl.lit(e.kind).alias("kind"))
        )
    return tables, all_runs


def board_metadata(made: Made, text, separable: pl.DataFrame, out, manifest: dict,
                   excluded: int, ties: str) -> dict:  # fmt: skip
    """The board asset's metadata: its table, chart, tests, timings and readings."""
    board, tests, curve = made.board.table, made.board.tests, made.board.curve
    metric = made.board.metric
    heat = {
        f"p-values {s}": figure_markdown(pvalue_heatmap(tests, s), f"p-values, {s}")
        for s in board["setting"].unique(maintain_order=True).to_list()
        if tests.filter(pl.col("setting") == s).height
    }
    return {
        **stage_metadata(board.height),
        "ndcg_ties": ties,
        "judge_backend": manifest.get("judge_backend", "unknown"),
        "caveat": MetadataValue.md(text.caveat or "none"),
        "domains": MetadataValue.md(text.note or "no coverage in the benchmark's manifest"),
        "table": MetadataValue.md(text.table),
        "chart": figure_markdown(board_chart(board), "leaderboard"),
        "significance": MetadataValue.md(text.legend),
        "significance_seconds": round(made.test_seconds, 2),
        "joint_seconds": round(made.joint_seconds, 2),  # the joint board and the rounds curve
        "joint_intervals": f"none: {made.no_joint}"
        if made.no_joint
        else "judge noise carried (leaderboard/joint.py)",
        "rounds_resolution": MetadataValue.md(
            markdown_table(curve, max_rows=100).value if curve is not None else "none"
        ),
        "separable_pairs": MetadataValue.md(
            markdown_table(separable).value if separable.height else "no pairs"
        ),
        "contamination": MetadataValue.md(contamination_paragraph(board)),
        "own_match_queries_excluded": excluded,
        **heat,
        "csv": MetadataValue.path(str(out / TABLE_CSV)),
        "best": json.dumps(
            board.group_by("setting")
            .agg(pl.col("retriever").first(), pl.col(metric).first().round(4))
            .to_dicts()
        ),
    }
