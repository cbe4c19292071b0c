"""The `saber build` command: its arguments, parsed and handed to ``orchestration.launch.build``."""

from __future__ import annotations

import argparse
import os
import sys

from saber_assets.config import DEFAULT_CONFIG, REPO_ROOT, data_home
from saber_assets.home_lock import holding_home
from saber_assets.stages import select_help
from saber_resources.progress import ENV as PROGRESS_ENV

# datatrove draws progress bars on stderr; the build prints its own summary.
os.environ.setdefault("TQDM_DISABLE", "1")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="materialise every asset on a pipeline config")
    p.add_argument(
        "--config", help=f"pipeline config YAML (default {DEFAULT_CONFIG.relative_to(REPO_ROOT)})"
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="show Dagster's own log on the console: -v its INFO lines, -vv DEBUG too",
    )
    p.add_argument(
        "--log-level",
        help="Dagster's console log level (overrides -v; default: none, the build prints one "
        "line per step and each warning in plain words)",
    )
    p.add_argument("--force", action="store_true", help="rebuild every step, up to date or not")
    p.add_argument(
        "--steps",
        action="store_true",
        help="a line per step and partition (default: a stage of many partitions is one "
        "progress line on a terminal and one summary line in a log)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="if another command holds the home (one build per home), wait for it instead of "
        "stopping",
    )
    p.add_argument(
        "--on", metavar="URL", help="launch the build on a running Dagster webserver (GraphQL)"
    )
    p.add_argument(
        "--accept-failed-checks",
        action="store_true",
        help="go on past a check that fails at ERROR severity (the judge's position bias): "
        "the benchmark is built and records the failure, which `saber push` then refuses "
        "unless given the same flag",
    )
    p.add_argument(
        "--select",
        action="append",
        help="only these: " + select_help() + "; and/or domain=NAME (a title or its "
        "partition key); repeatable",
    )


def run(args: argparse.Namespace) -> int:
    from saber_assets.orchestration.launch import QUIET, Console, build, terminal_line

    level = args.log_level or {0: QUIET, 1: "INFO"}.get(args.verbose, "DEBUG")
    # progress of long work: redrawn lines on a terminal, a line every half minute in a log
    os.environ.setdefault(PROGRESS_ENV, "1" if sys.stderr.isatty() else "log")
    if args.on:  # the deployment runs it: its own instance, nothing of this home is written
        return build(args.config, level, args.force, args.select, args.on)
    command = f"saber build --config {args.config or DEFAULT_CONFIG}"
    # a stage of many partitions: one line redrawn on a terminal, one summary line in a log
    console = Console(live=terminal_line if sys.stdout.isatty() else None, steps=args.steps)
    with holding_home(data_home(), command, args.wait):
        return build(args.config, level, args.force, args.select, console=console,
                     accept_failed_checks=args.accept_failed_checks)  # fmt: skip
