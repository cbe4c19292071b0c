"""indexes stage: the retriever registry (one observed partition per entry) and each retriever's
document-side index."""

import shutil
from pathlib import Path

import polars as pl
from dagster import (
    AssetExecutionContext,
    DataVersionsByPartition,
    MaterializeResult,
    MetadataValue,
)

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import SETTINGS, document_side
from saber_assets.lib.declare import source_asset, stage_asset
from saber_assets.lib.metadata import markdown_table
from saber_assets.lib.partitions import retriever_partitions
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.discovery import entry_settings, registered_entry, registry_for
from saber_assets.retrievers.indexes import prepare_index
from saber_assets.retrievers.registry import (
    RetrieverResources,
    build_retriever,
    definitions_by_name,
)
from saber_assets.retrievers.token_table import prune_token_tables
from saber_assets.versions import registry_versions
from saber_resources.stores import StoresResource


@source_asset(partitions_def=retriever_partitions)
def retriever_registry(
    context, pipeline: PipelineResource, stores: StoresResource
) -> DataVersionsByPartition:
    """One registry entry per `retriever` partition: its data version hashes the entry (and the
    entries a fusion reads), so that adding or changing one entry marks only that retriever's
    index and runs unsynced. A removed entry is not observed again: its partitions keep their
    last version and their runs, and the leaderboard stops showing it."""
    have = set(context.instance.get_dynamic_partitions(retriever_partitions.name))
    entries = registry_for(pipeline.load(), stores.db())
    versions = registry_versions(definitions_by_name(entries))
    return DataVersionsByPartition({k: v for k, v in versions.items() if k in have})


def drop_per_setting_indexes(root: Path) -> list[str]:
    """Remove index folders of the earlier layout (one per setting, now one per document side):
    left behind they would hold a second copy of every document-side index on disk."""
    gone = [s for s in SETTINGS if (root / s).is_dir()]
    for s in gone:
        shutil.rmtree(root / s, ignore_errors=True)
    return gone


@stage_asset(
    reads=("retrievers.settings", "retrievers.full_corpus"),
    kinds={"parquet", "numpy"},
    deps=["evaluation_benchmark", retriever_registry],
    pool="llm",  # document embeddings share the GPU with the judge and the re-ranker
)
def retriever_index(
    context: AssetExecutionContext, pipeline: PipelineResource, stores: StoresResource
) -> MaterializeResult:
    """One retriever's document-side work per setting (tokens, term statistics and matrices, the
    Approach Zero index, document embeddings), built once per document set and read by every
    domain's run. An index that already matches the documents and the entry is kept as it is."""
    entries, entry = registered_entry(pipeline, context.partition_key, stores.db())
    retriever = build_retriever(entry, RetrieverResources.from_stores(stores.db(), entries))
    bench = Benchmark.read_kept(pipeline.outputs().evaluation_benchmark)
    for old in drop_per_setting_indexes(pipeline.outputs().index(entry.name)):
        context.log.info(f"{entry.name}: removed the per-setting index folder {old!r}")
    by_side: dict[str, list[str]] = {}
    for s in entry_settings(pipeline, entry):
        by_side.setdefault(document_side(s), []).append(s)
    infos = [
        prepare_index(pipeline, retriever, entry, bench, s[0], use=False) for s in by_side.values()
    ]
    infos = [i for i in infos if i is not None]
    for i in infos:
        if i.rebuilt_because:
            context.log.warning(f"{entry.name} / {i.setting}: index rebuilt ({i.rebuilt_because})")
    tables = pipeline.outputs().token_tables
    pruned = prune_token_tables(tables, tables.parent)
    if pruned:
        context.log.info(f"removed {len(pruned)} token table(s) no index names: {pruned}")
    table = pl.DataFrame(
        [
            {
                "documents_of": i.setting,
                "settings": ", ".join(by_side[i.setting]),
                "documents": i.documents,
                "built": i.built,
                "seconds": round(i.seconds, 2),
                "MB": round(i.bytes / 2**20, 2),
                "rebuilt_because": i.rebuilt_because or "",
            }
            for i in infos
        ],
        schema={
            "documents_of": pl.String,
            "settings": pl.String,
            "documents": pl.Int64,
            "built": pl.Boolean,
            "seconds": pl.Float64,
            "MB": pl.Float64,
            "rebuilt_because": pl.String,
        },
    )
    return MaterializeResult(
        metadata={
            "retriever": entry.name,
            "kind": entry.kind,
            "indexes": markdown_table(table) if infos else "none: no document-side work of its own",
            "built": sum(i.built for i in infos),
            "token_tables_removed": len(pruned),
            "MB": round(sum(i.bytes for i in infos) / 2**20, 2),
            "path": MetadataValue.path(str(pipeline.outputs().index(entry.name))),
        }
    )
