"""leaderboard stage: the leaderboard over every registered retriever's runs."""

import json
import time

import matplotlib
import numpy as np
import polars as pl
from dagster import AssetExecutionContext, MaterializeResult, MetadataValue

from saber_assets.benchmark.data import Benchmark
from saber_assets.contamination.matches import audited_items, declared_training, own_matched_queries
from saber_assets.io_managers import refresh_warehouse
from saber_assets.leaderboard.contamination_columns import (
    checked_rows,
    contamination_columns,
    contamination_paragraph,
)
from saber_assets.leaderboard.evaluate import report
from saber_assets.leaderboard.metrics import metric_column, score_column
from saber_assets.leaderboard.plots import pvalue_heatmap
from saber_assets.leaderboard.provenance import SCORING_CODE, benchmark_id
from saber_assets.leaderboard.rows import entry_rows
from saber_assets.leaderboard.significance import beats_column, significance_tables
from saber_assets.lib.declare import stage_asset
from saber_assets.lib.metadata import figure_markdown, markdown_table, stage_metadata
from saber_assets.outputs import written_whole
from saber_assets.resources import PipelineResource
from saber_assets.retrievers.discovery import registry_for
from saber_assets.retrievers.registry import unavailable_reason
from saber_assets.versions import code_digest
from saber_resources.stores import StoresResource
from saber_resources.warehouse import Warehouse

matplotlib.use("Agg")


CPU_JUDGE_CAVEAT = (
    "**Caveat: CPU judge.** These ratings come from the CPU stand-in judge, not an LLM: it "
    "prefers the candidate with the higher s = 0.45·e + 0.25·k + 0.20·t + 0.10·u, where e is the "
    "MiniLM (all-MiniLM-L6-v2) cosine of problem + solution, k the overlap of named techniques "
    "in the solutions, t the topic signal (BMA of Lin) and u the summary signal (formula "
    "cpu-evidence-judge/v2). No retriever registered by default uses MiniLM, but t and u also "
    "chose the candidates, and a stand-in is not a mathematician: compare retrievers for real "
    "only on a benchmark judged by an LLM.\n\n"
)


def superscript_board(board: pl.DataFrame) -> str:
    """ranx's convention: per setting, each system gets a letter, and its nDCG@10 carries the
    letters of the systems it is significantly better than (paired randomization test, Holm)."""
    lines = ["Significance (paired randomization test, Holm-corrected over the pairs of a "
             "setting): a superscript names the systems a row is significantly better than."]  # fmt: skip
    m = score_column(board)
    for (setting,), part in board.group_by("setting", maintain_order=True):
        letter = {
            r: chr(ord("a") + k) if k < 26 else f"s{k}" for k, r in enumerate(part["retriever"])
        }
        lines += [
            "",
            f"**{setting}**",
            "",
            f"| | retriever | nDCG@{m.split('@')[1]} | rank (95%) |",
            "|---|---|---|---|",
        ]
        for r in part.iter_rows(named=True):
            sup = "".join(
                sorted(letter[x] for x in (r.get("beats") or "").split(", ") if x in letter)
            )
            cell = f"{r[m]:.4f}" + (f"<sup>{sup}</sup>" if sup else "")
            lines.append(
                f"| {letter[r['retriever']]} | {r['retriever']} | {cell} | {r.get('rank_ci') or ''} |"
            )
    return "\n".join(lines)


def domain_cells(board: pl.DataFrame, domains: list[str], coverage: list[dict]) -> list[pl.Expr]:
    """The markdown board's domain columns, each headed with the queries its cells average
    (from ``"{domain} queries"``) and marked where the domain fell below its quota."""
    short = {c["domain"] for c in coverage if c["queries"] < c["quota"]}
    out = []
    for d in domains:
        if d not in board.columns:
            continue
        n = board[f"{d} queries"].max() if f"{d} queries" in board.columns else None
        head = f"{d} (n={n}{', below quota' if d in short else ''})" if n is not None else d
        out.append(pl.col(d).round(4).alias(head))
    return out


def coverage_note(coverage: list[dict]) -> str:
    """The leaderboard's opening words on the domains: every one at its quota, or those that
    are not, with why (the counts of ``candidates.coverage``)."""
    short = [c for c in coverage if c["queries"] < c["quota"]]
    if not coverage:
        return ""
    if not short:
        quota = coverage[0]["quota"]
        return (
            f"Every domain holds its quota of {quota} queries; n = the queries a cell averages.\n\n"
        )
    lines = ["**Domains below quota** (n = the queries a cell averages; a query in several "
             "domains counts in each):", ""]  # fmt: skip
    for c in short:
        lines.append(f"- {c['domain']}: {c['queries']} of {c['quota']} queries, {c['status']}")
    return "\n".join(lines) + "\n\n"


def contamination_view(board: pl.DataFrame, metric: str) -> list[pl.Expr]:
    """The contamination columns of the markdown board, when any row has checked training
    data (they would be empty otherwise)."""
    if checked_rows(board).is_empty():
        return []
    return [
        pl.col("contaminated_share").round(3),
        pl.col(f"{metric}_clean").round(4),
        pl.col("ci_low_clean").round(4),
        pl.col("ci_high_clean").round(4),
    ]


def _bar_chart(table: pl.DataFrame) -> MetadataValue:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.35 * table.height + 1.2))
    labels = [f"{r} / {s}" for r, s in zip(table["retriever"], table["setting"], strict=True)]
    y = np.arange(table.height)
    m = score_column(table)
    ax.barh(
        y,
        table[m].to_numpy(),
        xerr=[table[m] - table["ci_low"], table["ci_high"] - table[m]],
        color="#4c72b0",
    )
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"nDCG@{m.split('@')[1]} (exponential gain), 95% bootstrap CI")
    return figure_markdown(fig, "leaderboard")


@stage_asset(
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
    manifest = bench.manifest
    domains = bench.domain_list()
    bench_id, code = benchmark_id(bench), code_digest(SCORING_CODE)
    tables, all_runs = [], []
    lb = cfg.leaderboard
    declared, audits = declared_training(entries), audited_items(pipeline.outputs().contamination)
    excluded = (
        own_matched_queries(pipeline.outputs().contamination)
        if lb.contamination.exclude_own_matches
        else set()
    )

    def rescore(runs: pl.DataFrame) -> pl.DataFrame:
        return report(runs, domains, lb.bootstrap_resamples, cfg.seed, k=lb.k)

    for e in entries:
        files = sorted((pipeline.outputs().runs / e.name).glob("*.parquet"))
        if not files:
            why = unavailable_reason(e, entries)
            context.log.warning(
                f"no runs for {e.name!r}: " + (f"it cannot run here ({why})" if why else "not yet")
            )
            continue
        # diagonal: a domain's file written before a column was added still reads
        runs = pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
        if excluded:
            runs = runs.filter(~pl.col("query_id").is_in(sorted(excluded)))
        all_runs.append(runs.with_columns(pl.lit(e.name).alias("retriever")))

        def board_columns(rep: pl.DataFrame, e=e, runs=runs) -> pl.DataFrame:
            rep = rep.join(
                contamination_columns(
                    rep, runs, bench, declared[e.name], audits, lb.contamination.top_candidates,
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
            code=code, columns=board_columns,
        )  # fmt: skip
        if rep.is_empty():
            context.log.warning(
                f"{e.name!r}: its runs hold no query (the benchmark has no query in any domain)"
            )
            continue
        tables.append(
            rep.with_columns(pl.lit(e.name).alias("retriever"), pl.lit(e.kind).alias("kind"))
        )
    if not tables and bench.queries.height == 0:
        context.log.warning(
            "the benchmark has no queries: the leaderboard is empty (too few viable queries: see relevance_thresholds)"
        )
        return MaterializeResult(
            metadata={**stage_metadata(0), "warning": "the benchmark has no queries"}
        )
    if not tables:
        raise ValueError("no retriever has scored any query: materialise retriever_runs first")
    metric = metric_column(lb.k)
    t0 = time.perf_counter()
    cols = ["retriever", "query_id", "setting", "domains", "ndcg"]
    tests, ranks = significance_tables(
        pl.concat([r.select(cols) for r in all_runs]), domains, lb.bootstrap_resamples,
        lb.test_resamples, cfg.seed, lb.alpha,
    )  # fmt: skip
    test_seconds = time.perf_counter() - t0
    board = (
        pl.concat(tables, how="diagonal")
        .with_columns(pl.lit(manifest.get("judge_backend", "unknown")).alias("judge_backend"))
        .join(ranks.select("setting", "retriever", "rank_ci"), on=["setting", "retriever"],
              how="left")
        .join(beats_column(tests), on=["setting", "retriever"], how="left")
        .select("retriever", "kind", "setting", pl.all().exclude("retriever", "kind", "setting"))
        .sort("setting", metric, descending=[False, True])
    )  # fmt: skip
    out = pipeline.outputs().leaderboard
    out.mkdir(parents=True, exist_ok=True)
    for write, name in ((tests.write_parquet, "significance.parquet"),
                        (tests.write_csv, "significance.csv"), (board.write_csv, "leaderboard.csv"),
                        (board.write_parquet, "leaderboard.parquet")):  # fmt: skip
        with written_whole(out / name) as tmp:  # the warehouse's `leaderboard` view reads it
            write(tmp)
    refresh_warehouse(warehouse, context)
    md = markdown_table(
        board.select(
            "retriever",
            "setting",
            "row_id",
            pl.col(metric).round(4),
            pl.col("ci_low").round(4),
            pl.col("ci_high").round(4),
            *domain_cells(board, domains, manifest.get("coverage", [])),
            "failed",
            pl.col("median_latency_ms").round(2),
            "rank_ci",
            "beats",
            *contamination_view(board, metric),
        ),
        max_rows=500,
        max_chars=40,
    )
    judge = manifest.get("judge_backend", "unknown")
    caveat = CPU_JUDGE_CAVEAT if judge == "cpu" else ""
    legend = superscript_board(board)
    domains_note = coverage_note(manifest.get("coverage", []))
    (out / "leaderboard.md").write_text(
        f"Judge backend: {judge}\n\n{caveat}{domains_note}" + md.value + "\n\n" + legend + "\n"
    )
    heat = {
        f"p-values {s}": figure_markdown(pvalue_heatmap(tests, s), f"p-values, {s}")
        for s in board["setting"].unique(maintain_order=True).to_list()
        if tests.filter(pl.col("setting") == s).height
    }
    return MaterializeResult(
        metadata={
            **stage_metadata(board.height),
            "judge_backend": judge,
            "caveat": MetadataValue.md(caveat or "none"),
            "domains": MetadataValue.md(domains_note or "no coverage in the benchmark's manifest"),
            "table": md,
            "chart": _bar_chart(board),
            "significance": MetadataValue.md(legend),
            "significance_seconds": round(test_seconds, 2),
            "contamination": MetadataValue.md(contamination_paragraph(board)),
            "own_match_queries_excluded": len(excluded),
            **heat,
            "csv": MetadataValue.path(str(out / "leaderboard.csv")),
            "best": json.dumps(
                board.group_by("setting")
                .agg(pl.col("retriever").first(), pl.col(metric).first().round(4))
                .to_dicts()
            ),
        }
    )
