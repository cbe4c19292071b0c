"""Parquet IO manager that keeps the DuckDB views over the Parquet assets current."""

import typing
from pathlib import Path

import duckdb
import polars as pl
from dagster import InputContext, OutputContext, ResourceDependency
from dagster_polars import PolarsParquetIOManager

from saber_assets.outputs import written_whole
from saber_resources.warehouse import Warehouse


class WarehouseParquetIOManager(PolarsParquetIOManager):
    """dagster-polars Parquet storage; after each write, refresh the `sql/` views that can be made."""

    warehouse: ResourceDependency[Warehouse]

    def handle_output(self, context: OutputContext, obj) -> None:
        super().handle_output(context, obj)
        refresh_warehouse(self.warehouse, context)

    def write_df_to_path(self, context: OutputContext, df: pl.DataFrame, path) -> None:
        """A local table is written whole or not at all (``outputs.written_whole``); an object
        store's put is already whole."""
        if getattr(path, "protocol", "") not in ("", "file", "local"):
            return super().write_df_to_path(context, df, path)
        with written_whole(Path(path)) as tmp:
            super().write_df_to_path(context, df, path.with_name(tmp.name))

    def load_partitions(self, context: InputContext):
        """An input declared as ``dict[str, DataFrame]`` (every partition of the parent) gets a
        dict even when the parent has one partition (an ontology with one domain): Dagster's
        own loader hands a single partition over bare, which the input's type check refuses."""
        loaded = super().load_partitions(context)
        keys = context.asset_partition_keys
        hint = getattr(context.dagster_type, "typing_type", None)
        if len(keys) == 1 and typing.get_origin(hint) is dict and loaded is not None:
            return {keys[0]: loaded}
        return loaded


def refresh_warehouse(warehouse: Warehouse, context) -> None:
    """Refresh the views; another process holding the file lock, or a full disk, only delays
    them (they are derived from the Parquet files: the table itself was written)."""
    try:
        warehouse.refresh_views()
    except (duckdb.IOException, duckdb.TransactionException) as exc:
        context.log.warning(
            f"DuckDB views not refreshed ({exc}); `saber build` / `saber warehouse` refresh them"
        )


def concat_partitions(parts: dict[str, pl.DataFrame] | pl.DataFrame) -> pl.DataFrame:
    """All partitions of an upstream asset (as the IO manager loads them) as one frame, in key order."""
    if isinstance(parts, pl.DataFrame):
        return parts
    frames = [parts[k] for k in sorted(parts)]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
