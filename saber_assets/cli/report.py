"""`saber report`: the path of the HTML benchmark report."""

from __future__ import annotations

import argparse
import sys

from saber_assets.config import DEFAULT_CONFIG, load_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="print the path of the HTML benchmark report")
    p.add_argument("--config", help="pipeline config YAML")


def run(args: argparse.Namespace) -> int:
    return report_cmd(args.config)


def report_cmd(config: str | None) -> int:
    """Print the path of the benchmark report (the `benchmark_report` asset writes it)."""
    from saber_assets.analyses.report_assets import report_path
    from saber_assets.resources import PipelineResource

    load_config(config)  # a bad config is reported like everywhere else
    path = report_path(PipelineResource(config_file=str(config or DEFAULT_CONFIG)))
    if not path.exists():
        print(
            f"saber: no report at {path} yet: run `saber build` (or materialise "
            "benchmark_report in the UI)",
            file=sys.stderr,
        )
        return 1
    print(path)
    return 0
