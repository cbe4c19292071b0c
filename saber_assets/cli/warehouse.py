"""`saber warehouse`: the DuckDB warehouse's views over the Parquet outputs, refreshed or rebuilt."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from saber_assets.config import DEFAULT_CONFIG, PipelineConfig, data_home, load_config
from saber_assets.home_lock import holding_home


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "warehouse", help="refresh the DuckDB warehouse (views over the Parquet outputs)"
    )
    p.add_argument("--config", help="pipeline config YAML")
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="recreate the file (a file from the older layout that still holds the stores' "
        "tables is migrated and kept as a backup, never deleted)",
    )
    p.add_argument("--wait", action="store_true", help="wait while another command holds the home")


def run(args: argparse.Namespace) -> int:
    return warehouse_cmd(args.config, args.rebuild, args.wait)


def warehouse_cmd(config: str | None, rebuild: bool, wait: bool = False) -> int:
    """Refresh (or rebuild from scratch) the DuckDB warehouse: views over the Parquet outputs."""
    cfg = load_config(config)
    from saber_assets.definitions import make_definitions

    home = data_home()
    with holding_home(home, f"saber warehouse --config {config or DEFAULT_CONFIG}", wait):
        wh = make_definitions(config, home, cfg).resources["warehouse"]
        if rebuild and Path(wh.path).exists():
            set_aside(cfg, home, Path(wh.path))
        views = wh.refresh_views()
    print(f"warehouse: {wh.path}\nviews: {', '.join(views) or 'none (build first)'}")
    return 0


def set_aside(cfg: PipelineConfig, home: Path, path: Path) -> None:
    """Remove the warehouse file for a rebuild, losing nothing: a file from the older layout
    that still holds store tables (the caches, judgments, human labels) has them copied into
    the DuckDB stores first and is kept as ``<file>.<time>.bak``; a file of views only goes."""
    from saber_assets.pipeline import open_stores
    from saber_resources.stores import DuckDBStore, migrate_duckdb, store_tables_in

    held = {t: n for t, n in store_tables_in(str(path)).items() if n}
    if not held:
        path.unlink()
        return
    stores = open_stores(cfg, home)
    if isinstance(stores, DuckDBStore):
        copied = migrate_duckdb(str(path), stores)
        print(f"warehouse: copied the store tables it held into the stores: {', '.join(copied)}")
    backup = path.with_name(f"{path.name}.{datetime.now(UTC):%Y%m%dT%H%M%S}.bak")
    path.rename(backup)
    rows = ", ".join(f"{t} {n:,}" for t, n in held.items())
    print(f"warehouse: the old file held store tables ({rows}); kept as {backup}")
