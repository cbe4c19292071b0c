"""The `saber` command line: one module per command, each with ``add_parser(sub)`` and
``run(args)``; a command calls the same functions its assets call."""

from __future__ import annotations

import argparse
import sys
import warnings

from saber_assets.cli import (
    build,
    cost,
    diff,
    evaluate,
    export,
    llm_server,
    pull,
    push,
    registry,
    report,
    study,
    ui,
    verify,
    warehouse,
)

# in the order `saber --help` lists them
COMMANDS = {
    "build": build,
    "evaluate": evaluate,
    "pull": pull,
    "push": push,
    "warehouse": warehouse,
    "cost": cost,
    "export": export,
    "report": report,
    "verify": verify,
    "diff": diff,
    "study": study,
    "registry": registry,
    "llm-server": llm_server,
    "ui": ui,
}

ALIASES = {"annotate": "study"}  # old names that still work


def quiet_dagster_notices() -> None:
    """Dagster's notices that an API this project pins and tests is in beta or preview say nothing
    a user of `saber` can act on; pytest and the UI's code server still show them."""
    warnings.filterwarnings("ignore", message=r".* is currently in (beta|preview)")


def build_parser() -> argparse.ArgumentParser:
    """The `saber` command line: every command and its options (the docs' command lines are
    checked against it, tests/test_docs.py)."""
    parser = argparse.ArgumentParser(
        prog="saber", description="Build and evaluate SABER-Math-style benchmarks."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    quiet_dagster_notices()
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[ALIASES.get(args.command, args.command)].run(args)
    except (FileNotFoundError, ValueError) as exc:  # config, registry and benchmark errors
        print(f"saber: {exc}", file=sys.stderr)
        return 2
