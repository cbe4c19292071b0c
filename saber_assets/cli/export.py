"""`saber export`: the benchmark as BEIR, TREC qrels or an MTEB reranking task."""

from __future__ import annotations

import argparse
from pathlib import Path

from saber_assets.benchmark.texts import SETTINGS
from saber_assets.config import data_home, load_config
from saber_assets.home_lock import holding_home
from saber_assets.outputs import Outputs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write the benchmark as BEIR, TREC qrels or MTEB")
    p.add_argument("--format", required=True, choices=["beir", "trec", "mteb"])
    p.add_argument("dir", help="output directory")
    p.add_argument(
        "--setting",
        default="statement-full",
        choices=SETTINGS,
        help="which texts queries and documents carry (default statement-full)",
    )
    p.add_argument("--benchmark", help="exchange-format directory (default: the built one)")
    p.add_argument("--config", help="pipeline config YAML")


def run(args: argparse.Namespace) -> int:
    with holding_home(data_home(), "saber export"):  # never a benchmark half rewritten
        return export_cmd(args)


def export_cmd(args) -> int:
    """The built benchmark (or --benchmark DIR) as BEIR, TREC qrels or an MTEB reranking task."""
    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.formats import export

    cfg = load_config(args.config)
    bench_dir = Path(args.benchmark) if args.benchmark else Outputs.of(cfg).benchmark
    files = export(Benchmark.read(bench_dir), args.format, Path(args.dir), args.setting)
    print(f"{args.format} ({args.setting}) from {bench_dir}: {len(files)} files under {args.dir}")
    return 0
