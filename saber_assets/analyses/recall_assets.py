"""The published benchmark found in the built corpus (``published_recall``): an asset of its own
module, so that an edit of the contamination matching it runs moves it and not every analysis."""

from __future__ import annotations

import polars as pl
from dagster import Output

from saber_assets.analyses.published_recall import RECALL_SCHEMA, published_recall
from saber_assets.benchmark.data import Benchmark
from saber_assets.config import resolve_path
from saber_assets.lib.declare import analysis
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.pipeline import PipelineResource


@analysis()
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
