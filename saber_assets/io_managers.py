"""Parquet IO manager that keeps the DuckDB views over the Parquet assets current."""

import duckdb
import polars as pl
from dagster import OutputContext, ResourceDependency
from dagster_polars import PolarsParquetIOManager

from saber_resources.warehouse import Warehouse


class WarehouseParquetIOManager(PolarsParquetIOManager):
    """dagster-polars Parquet storage; after each write, refresh the `sql/` views that can be made."""

    warehouse: ResourceDependency[Warehouse]

    def handle_output(self, context: OutputContext, obj) -> None:
        super().handle_output(context, obj)
        refresh_warehouse(self.warehouse, context)


def refresh_warehouse(warehouse: Warehouse, context) -> None:
    """Refresh the views; another process holding the file lock only delays them."""
    try:
        warehouse.refresh_views()
    except duckdb.IOException as exc:
        context.log.warning(
            f"DuckDB views not refreshed ({exc}); `saber build` / `saber warehouse` refresh them"
        )


def concat_partitions(parts: dict[str, pl.DataFrame] | pl.DataFrame) -> pl.DataFrame:
    """All partitions of an upstream asset (as the IO manager loads them) as one frame, in key order."""
    if isinstance(parts, pl.DataFrame):
        return parts
    frames = [parts[k] for k in sorted(parts)]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
