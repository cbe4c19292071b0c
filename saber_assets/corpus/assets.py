"""corpus stage: declared sources -> normalised, validated, de-duplicated problems."""

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AssetOut,
    MetadataValue,
    Output,
)

from saber_assets.corpus.build import build_corpus, corpus_version
from saber_assets.corpus.instructions import instruction_like
from saber_assets.lib.declare import input_files_asset, stage_check, stage_multi_asset
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.pipeline import PipelineResource

corpus_sources = input_files_asset(
    "corpus_sources", __name__, "The corpus source files (`corpus.sources`), by content hash."
)


@stage_multi_asset(
    reads=("seed", "corpus"),
    deps=[corpus_sources],
    outs={
        "corpus": AssetOut(
            io_manager_key="parquet_io",
            description="De-duplicated problems with worked solutions; id = source:native_id.",
            kinds={"polars", "parquet"},
        ),
        "corpus_quarantine": AssetOut(
            io_manager_key="parquet_io",
            description="Rejected source rows, one reason each.",
            kinds={"polars", "parquet"},
        ),
        "corpus_duplicates": AssetOut(
            io_manager_key="parquet_io",
            description="Near-duplicates removed by MinHash, with the row kept instead.",
            kinds={"polars", "parquet"},
        ),
    },
)
def corpus_assets(context: AssetExecutionContext, pipeline: PipelineResource):
    cfg = pipeline.load()
    built = build_corpus(cfg.corpus, cfg.seed)
    corpus = built.corpus
    version = corpus_version(corpus)
    preview = corpus.select("id", "category", "problem", "solution").head(8)
    flagged = instruction_like(corpus)
    if flagged.height:
        context.log.warning(
            f"corpus: {flagged['id'].n_unique()} problems read as instructions to a model "
            "(kept; see the corpus's instruction_like metadata)"
        )
    context.log.info(
        f"corpus: {corpus.height} problems, {built.duplicates.height} duplicates removed, {built.quarantine.height} quarantined"
    )
    yield Output(
        corpus,
        output_name="corpus",
        metadata={
            **stage_metadata(corpus.height),
            "corpus_version": version,
            "config": cfg.name,
            "sample_seed": cfg.seed,
            "per_source": markdown_table(built.per_source),
            "duplicates_removed": built.duplicates.height,
            "quarantined": built.quarantine.height,
            "preview": markdown_table(preview, max_chars=60),
            # texts that speak to a model: kept (each prompt says a text is data), for a look
            "instruction_like_problems": flagged["id"].n_unique(),
            "instruction_like": markdown_table(flagged, max_rows=50, max_chars=80),
            "seconds_read_validate": round(built.seconds["read_validate"], 2),
            "seconds_dedup": round(built.seconds["dedup"], 2),
        },
    )
    reasons = (
        built.quarantine.group_by(pl.col("reason").str.replace(r"\d[\d,]*", "N"))
        .len()
        .sort("len", descending=True)
    )
    yield Output(
        built.quarantine,
        output_name="corpus_quarantine",
        metadata={**stage_metadata(built.quarantine.height), "reasons": markdown_table(reasons)},
    )
    yield Output(
        built.duplicates,
        output_name="corpus_duplicates",
        metadata={
            **stage_metadata(built.duplicates.height),
            "clusters": built.duplicates["cluster"].n_unique() if built.duplicates.height else 0,
            "examples": markdown_table(built.duplicates.head(10)),
        },
    )


@stage_check("corpus", description="Problem ids are unique and every row has text.")
def corpus_ids_unique(corpus: pl.DataFrame) -> AssetCheckResult:
    dupes = corpus.height - corpus["id"].n_unique()
    empty = corpus.filter(
        (pl.col("problem").str.len_chars() == 0) | (pl.col("solution").str.len_chars() == 0)
    ).height
    return AssetCheckResult(
        passed=dupes == 0 and empty == 0,
        metadata={
            "duplicate_ids": dupes,
            "empty_texts": empty,
            "rows": MetadataValue.int(corpus.height),
        },
    )
