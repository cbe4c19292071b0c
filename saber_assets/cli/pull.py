"""`saber pull`: the published SABER-Math (two Hub datasets) in the exchange format."""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

from saber_assets.config import data_home
from saber_assets.home_lock import holding_home


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pull", help="the published SABER-Math (two Hub datasets) in the exchange format"
    )
    p.add_argument("out", help="output directory (exchange format)")
    p.add_argument("--queries-dir", help="a snapshot folder of the queries dataset (offline)")
    p.add_argument("--documents-dir", help="a snapshot folder of the documents dataset")
    p.add_argument(
        "--revision", action="append", metavar="TABLE=SHA",
        help="pin a dataset: queries=SHA and/or documents=SHA (default: the newest)",
    )  # fmt: skip
    p.add_argument("--queries-repo", default="INSAIT-Institute/SaberMath-queries")
    p.add_argument("--documents-repo", default="INSAIT-Institute/SaberMath-documents")


def run(args: argparse.Namespace) -> int:
    return pull_cmd(args)


def revisions(given: list[str] | None) -> dict[str, str]:
    out = {}
    for item in given or []:
        table, sep, sha = item.partition("=")
        if not sep or not sha:
            raise ValueError(f"--revision takes queries=SHA or documents=SHA, not {item!r}")
        out[table] = sha
    return out


def within(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies in ``folder`` (both resolved: a link or ``..`` counts where it leads)."""
    return path.resolve().is_relative_to(folder.resolve())


def pull_cmd(args) -> int:
    """The published SABER-Math (two Hub datasets, or two snapshot folders) in the exchange format."""
    from saber_assets.benchmark.hub import HubUnavailable, pull

    dirs = (args.queries_dir, args.documents_dir)
    home, out = data_home(), Path(args.out)
    # a pull into the home writes beside its builds: it holds the home as they do
    held = holding_home(home, "saber pull") if within(out, home) else nullcontext()
    try:
        with held:
            bench = pull(
                out,
                *(Path(d) if d else None for d in dirs),
                revisions=revisions(args.revision),
                repos=(args.queries_repo, args.documents_repo),
            )
    except HubUnavailable as exc:
        print(f"saber: {exc}", file=sys.stderr)
        return 2
    hub = bench.manifest["hub"]
    print(
        f"saber pull: {bench.queries.height} queries, {bench.documents.height} documents "
        f"-> {args.out} (exchange format)"
    )
    for table in ("queries", "documents"):
        h = hub[table]
        print(f"  {table}: {h['repo']} @ {h['revision'] or 'unknown revision (local folder)'}, "
              f"{len(h['files'])} file(s) from {h['folder']}")  # fmt: skip
    for note in bench.manifest.get("derived", []):
        print(f"  derived: {note}")
    return 0
