"""`saber warehouse`: the DuckDB warehouse's views over the Parquet outputs, refreshed or rebuilt."""

from __future__ import annotations

import argparse
from pathlib import Path

from saber_assets.config import load_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "warehouse", help="refresh the DuckDB warehouse (views over the Parquet outputs)"
    )
    p.add_argument("--config", help="pipeline config YAML")
    p.add_argument("--rebuild", action="store_true", help="delete the file and recreate it")


def run(args: argparse.Namespace) -> int:
    return warehouse_cmd(args.config, args.rebuild)


def warehouse_cmd(config: str | None, rebuild: bool) -> int:
    """Refresh (or rebuild from scratch) the DuckDB warehouse: views over the Parquet outputs."""
    load_config(config)
    from saber_assets.definitions import make_definitions

    wh = make_definitions(config).resources["warehouse"]
    if rebuild and Path(wh.path).exists():
        Path(wh.path).unlink()
    views = wh.refresh_views()
    print(f"warehouse: {wh.path}\nviews: {', '.join(views) or 'none (build first)'}")
    return 0
