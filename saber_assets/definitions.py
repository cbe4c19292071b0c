"""The single Dagster Definitions object of the saber code location."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import (
    AssetSelection,
    Definitions,
    define_asset_job,
    in_process_executor,
    load_asset_checks_from_modules,
    load_assets_from_modules,
    multiprocess_executor,
)

from saber_resources.warehouse import Warehouse

from . import corpus, ontology
from .corpus import assets as corpus_assets
from .ontology import assets as ontology_assets
from .ops.io import WarehouseParquetIOManager
from .resources import SaberSettings
from .settings import DEFAULT_CONFIG, SQL_DIR, data_home, load_config

STAGE_MODULES = [corpus_assets, ontology_assets]
assert corpus and ontology  # stage packages are the public layout; modules above hold the assets


def make_definitions(
    config_file: str | os.PathLike | None = None, home: Path | None = None
) -> Definitions:
    """Definitions for one pipeline config; outputs under ``home`` (default: $SABER_HOME or .saber/)."""
    config_file = str(config_file or os.environ.get("SABER_CONFIG") or DEFAULT_CONFIG)
    cfg = load_config(config_file)
    home = Path(home or data_home())
    parquet_dir = home / cfg.name / "parquet"
    warehouse = Warehouse(
        path=str(home / cfg.name / "warehouse.duckdb"),
        parquet_dir=str(parquet_dir),
        sql_dir=str(SQL_DIR),
    )
    executor = in_process_executor if cfg.executor == "in_process" else multiprocess_executor
    assets = load_assets_from_modules(STAGE_MODULES)
    build_all = define_asset_job(
        "build_all",
        selection=AssetSelection.all(),
        executor_def=executor,
        description="Materialise every asset of the benchmark on the configured sources (the `saber build` job).",
    )
    return Definitions(
        assets=assets,
        asset_checks=load_asset_checks_from_modules(STAGE_MODULES),
        jobs=[build_all],
        resources={
            "settings": SaberSettings(config_file=config_file),
            "warehouse": warehouse,
            "parquet_io": WarehouseParquetIOManager(base_dir=str(parquet_dir), warehouse=warehouse),
        },
        executor=executor,
    )


defs = make_definitions()
