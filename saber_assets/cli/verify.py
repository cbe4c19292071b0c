"""`saber verify`: every number a benchmark publishes, recomputed from its own files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from saber_assets.config import load_config
from saber_assets.outputs import Outputs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="recompute every published number from the benchmark's files, runs and board",
    )
    p.add_argument(
        "dir", nargs="?",
        help="the benchmark's exchange-format folder (default: the one the config's build "
        "scored); its runs and board are read from the folders beside it, runs/ and "
        "leaderboard/, unless --runs and --leaderboard say otherwise",
    )  # fmt: skip
    p.add_argument("--runs", help="the TREC runs: one folder per retriever, DOMAIN.SETTING.trec")
    p.add_argument("--leaderboard", help="the board's folder (leaderboard.parquet, board.json)")
    p.add_argument("--config", help="pipeline config YAML (where the build wrote them)")
    p.add_argument(
        "--flips", type=int, default=None,
        help="scipy's sign flips per pair for the randomization test (default 10,000)",
    )  # fmt: skip
    p.add_argument(
        "--allow-unchecked", action="append", default=[], metavar="NAME",
        help="accept this part unchecked (judgments, soft-grades, choix-ties, board); anything "
        "else left unchecked fails the verdict",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from saber_assets.leaderboard.verify import VERIFY_FLIPS, verify

    if args.dir:
        bench = Path(args.dir)
        runs, board = bench.parent / "runs", bench.parent / "leaderboard"
    else:
        out = Outputs.of(load_config(args.config))
        bench, runs, board = out.evaluation_benchmark, out.runs, out.leaderboard
    runs = Path(args.runs) if args.runs else runs
    board = Path(args.leaderboard) if args.leaderboard else board
    if not bench.is_dir():
        raise FileNotFoundError(f"{bench}: no benchmark folder (build it, or name one)")
    verdict = verify(
        bench, runs, board, flips=args.flips or VERIFY_FLIPS, allowed=args.allow_unchecked
    )
    print(f"benchmark: {bench}\nruns:      {runs}\nboard:     {board}")
    for kind, n in sorted(verdict.checked.items()):
        print(f"  {kind:<22} {n:>8,}")
    for line in verdict.not_checked:
        print(f"  not checked: {line}")
    if verdict.passed:
        print(verdict.summary())
        return 0
    print(verdict.table(), file=sys.stderr)
    print(verdict.summary(), file=sys.stderr)
    return 1
