"""The published benchmark's items found in the corpus (``candidates.published_queries``): the
queries a rebuild takes instead of drawing its own, and the candidates its grades are compared
on. An asset of its own so that the domains' partitions read one match, not five."""

from __future__ import annotations

import polars as pl
from dagster import Output

from saber_assets.benchmark.data import Benchmark
from saber_assets.config import resolve_path
from saber_assets.contamination.published import FOUND_SCHEMA, published_recall
from saber_assets.lib.declare import table_asset
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.pipeline import PipelineResource


@table_asset(reads=("candidates.published_queries",))
def published_matches(pipeline: PipelineResource, corpus: pl.DataFrame) -> Output[pl.DataFrame]:
    """Each item of the benchmark `candidates.published_queries` names that the corpus holds,
    once, with the corpus row it matched (normalised text, then a MinHash near-duplicate at the
    contamination audit's defaults) and how; empty, with a note, where none is named."""
    path = pipeline.load().candidates.published_queries
    if path is None:
        note = "no candidates.published_queries configured: the queries are drawn"
        return Output(
            pl.DataFrame(schema=FOUND_SCHEMA), metadata={**stage_metadata(0), "note": note}
        )
    tables = published_recall(Benchmark.read(resolve_path(path)), corpus)
    found = tables["found"]
    return Output(
        found,
        metadata={
            **stage_metadata(found.height),
            "published": str(path),
            "queries_found": tables["queries"].height,
            "documents_found": int((found["role"] == "candidate").sum()),
            "by_role_and_domain": markdown_table(tables["summary"], max_rows=60),
        },
    )
