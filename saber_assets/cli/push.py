"""`saber push`: a built benchmark as two Hub datasets with a card."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("push", help="a built benchmark as two Hub datasets with a card")
    p.add_argument("dir", help="exchange-format directory (e.g. .saber/sample/benchmark)")
    p.add_argument("--repo-prefix", required=True, metavar="OWNER/NAME")
    # private unless asked: a benchmark's texts may carry licences that forbid republishing
    visibility = p.add_mutually_exclusive_group()
    visibility.add_argument(
        "--public", action="store_true", help="create the datasets public (default: private)"
    )
    visibility.add_argument("--private", action="store_true", help="the default; kept for scripts")
    p.add_argument(
        "--explorer",
        metavar="DIR",
        help="publish the built explorer too (e.g. .saber/sample/explorer), under explorer/ "
        "of the queries dataset",
    )
    p.add_argument(
        "--accept-failed-checks",
        action="store_true",
        help="publish a benchmark whose build checks failed (the card says so); refused without",
    )
    p.add_argument(
        "--stage-only",
        metavar="DIR",
        help="write the two dataset folders under DIR, upload nothing",
    )
    p.add_argument("--runs", help="its TREC runs (default: runs/ beside the benchmark's folder)")
    p.add_argument(
        "--leaderboard", help="its board's folder (default: leaderboard/ beside the benchmark's)"
    )
    p.add_argument(
        "--allow-unchecked", action="append", default=[], metavar="NAME",
        help="as `saber verify`: accept this part unchecked (e.g. board, for a bundle without one)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    return push_cmd(args)


def push_cmd(args) -> int:
    """A built benchmark as two Hub datasets (``PREFIX-queries``, ``PREFIX-documents``)."""
    import tempfile

    from saber_assets.benchmark.data import Benchmark
    from saber_assets.benchmark.hub import HubUnavailable, push, stage_push
    from saber_assets.leaderboard.verify import verify, with_verdict

    bench_dir = Path(args.dir)
    bench = Benchmark.read(bench_dir)
    # what is published is verified here, on the files as they are now: a verdict recorded in
    # the manifest is the bundle's own word about itself
    verdict = verify(
        bench_dir,
        Path(args.runs) if getattr(args, "runs", None) else bench_dir.parent / "runs",
        Path(args.leaderboard) if getattr(args, "leaderboard", None)
        else bench_dir.parent / "leaderboard",
        allowed=getattr(args, "allow_unchecked", None) or [],
    )  # fmt: skip
    bench.manifest = with_verdict(bench.manifest, verdict)
    print(f"saber push: {verdict.summary()}", file=sys.stderr)
    if (failed := bench.failed_checks()) and not args.accept_failed_checks:
        print(
            f"saber push: refused: {len(failed)} check(s) of this benchmark's build failed:\n  "
            + "\n  ".join(failed)
            + "\nrebuild it (another judge, `tournament.both_orders`), or publish it anyway "
            "with --accept-failed-checks (its card then says so)",
            file=sys.stderr,
        )
        return 1
    explorer = Path(args.explorer) if getattr(args, "explorer", None) else None
    if args.stage_only:
        folders = stage_push(bench, Path(args.stage_only), args.repo_prefix, explorer)
        for repo, folder in folders.items():
            print(f"staged {repo}: {folder}")
        return 0
    with tempfile.TemporaryDirectory(prefix="saber-push-") as staging:
        try:
            done = push(
                bench, Path(staging), args.repo_prefix, private=not args.public, explorer=explorer
            )
        except HubUnavailable as exc:
            print(f"saber: {exc}", file=sys.stderr)
            return 2
    for repo, url in done.items():
        print(f"pushed {repo}: {url}")
    return 0
