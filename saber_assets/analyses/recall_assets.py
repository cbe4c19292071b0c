"""The published benchmark beside a rebuild: how much of it the built corpus holds
(``published_recall``) and, with its queries taken (``candidates.published_queries``), how the
rebuild's grades agree with its own (``grade_agreement``). A module of their own, so that an edit
of the contamination matching moves these and not every analysis."""

from __future__ import annotations

import polars as pl
from dagster import Output

from saber_assets.benchmark.data import Benchmark
from saber_assets.config import PipelineConfig, resolve_path
from saber_assets.contamination.published import (
    AGREEMENT_SCHEMA,
    RECALL_SCHEMA,
    agreement_reading,
    grade_agreement,
    published_recall,
)
from saber_assets.io_managers import concat_partitions
from saber_assets.lib.declare import analysis
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.lib.sections import Section, table_section
from saber_assets.pipeline import PipelineResource


@analysis(reads=("analyses.published_benchmark", "contamination"))
def published_benchmark_recall(
    pipeline: PipelineResource, corpus: pl.DataFrame
) -> Output[pl.DataFrame]:
    """How much of the published benchmark (`analyses.published_benchmark`, a `saber pull`
    folder) the built corpus holds: its queries and documents found by normalised text, then as
    MinHash near-duplicates, the share per role and published domain (the output), per corpus
    source, and the published queries found with their corpus ids. Without a published
    benchmark configured: empty, with a note saying so."""
    cfg = pipeline.load()
    path = cfg.analyses.published_benchmark
    if path is None:
        note = "no analyses.published_benchmark configured (a `saber pull` folder)"
        return Output(
            pl.DataFrame(schema=RECALL_SCHEMA), metadata={**stage_metadata(0), "note": note}
        )
    tables = published_recall(Benchmark.read(resolve_path(path)), corpus, cfg.contamination)
    summary = tables["summary"]
    overall = {
        r["role"]: r["share"]
        for r in summary.filter(pl.col("domain") == "all").iter_rows(named=True)
    }
    return Output(
        summary,
        metadata={
            **stage_metadata(summary.height),
            "published": str(path),
            "queries_found_share": overall.get("query"),
            "documents_found_share": overall.get("candidate"),
            "by_domain": markdown_table(summary, max_rows=60),
            "by_source": markdown_table(tables["by_source"], max_rows=60),
            "queries_found": markdown_table(tables["queries"], max_rows=100),
            "queries_found_count": tables["queries"].height,
        },
    )


agreement_table = table_section(
    "The published benchmark's grades beside the rebuild's",
    agreement_reading,
    "Per published query the corpus holds: its published candidates, those the corpus holds, "
    "those in the rebuild's own pool, and Kendall's τ-b between the two grades over them.",
)


def agreement_section(table: pl.DataFrame, cfg: PipelineConfig) -> Section | None:
    """The report's section, where the published queries were taken (none otherwise)."""
    return agreement_table(table, cfg) if cfg.candidates.published_queries else None


@analysis(section=agreement_section, reads=("candidates.published_queries",))
def published_grade_agreement(
    pipeline: PipelineResource,
    published_matches: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """With `candidates.published_queries`: per published query the corpus holds, the share of
    its published candidates in the rebuild's pool and Kendall's τ between the published grades
    and the rebuild's over the candidates both hold. Without it: empty, with a note."""
    path = pipeline.load().candidates.published_queries
    if path is None:
        note = "no candidates.published_queries configured: the queries were drawn"
        return Output(
            pl.DataFrame(schema=AGREEMENT_SCHEMA), metadata={**stage_metadata(0), "note": note}
        )
    table = grade_agreement(
        Benchmark.read(resolve_path(path)), published_matches, concat_partitions(relevance_ratings)
    )
    taus = table["kendall_tau"].drop_nulls()
    return Output(
        table,
        metadata={
            **stage_metadata(table.height),
            "published": str(path),
            "reading": agreement_reading(table),
            "mean_kendall_tau": float(taus.mean()) if taus.len() else None,
            "mean_pool_share": float(table["pool_share"].mean()) if table.height else None,
            "per_query": markdown_table(table, max_rows=100),
        },
    )
