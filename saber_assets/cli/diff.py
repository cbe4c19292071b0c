"""`saber diff OLD NEW`: what changed between two builds of a benchmark."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="what changed between two builds: queries, grades and the board's order",
    )
    p.add_argument(
        "old", help="the earlier build: its outputs folder (e.g. .saber/sample), a benchmark "
        "folder, or a snapshot the explorer kept (<outputs>/builds/<id>)",
    )  # fmt: skip
    p.add_argument("new", help="the later build, as OLD")
    p.add_argument("--json", action="store_true", help="print the diff as JSON")
    p.add_argument("--most", type=int, default=10, help="rows listed per part (default 10)")


def explorer_pages(folder: Path) -> dict[str, str]:
    """query id -> its page in the explorer of the build in ``folder``, where there is one."""
    site = folder / "explorer"
    queries = folder / "evaluation_benchmark" / "queries.parquet"
    if not (site / "index.html").is_file() or not queries.is_file():
        return {}
    from saber_assets.site.explorer_query import query_page_name

    ids = pl.read_parquet(queries, columns=["id"])["id"].to_list()
    return {q: (site / query_page_name(n)).resolve().as_uri() for n, q in enumerate(ids)}


def read_build(folder: Path):
    """``BuildState.read``, anything unreadable in it one line naming the folder (a damaged
    Parquet file raised a traceback)."""
    from saber_assets.site.build_diff import BuildState, printable

    try:
        return BuildState.read(folder)
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - polars, Arrow and JSON each raise their own
        detail = printable(str(exc).splitlines()[0] if str(exc) else "")[:300]
        raise ValueError(
            f"{folder}: cannot be read as a build ({type(exc).__name__}: {detail})"
        ) from None


def run(args: argparse.Namespace) -> int:
    from saber_assets.site.build_diff import diff_builds, diff_data, diff_lines

    old, new = read_build(Path(args.old)), read_build(Path(args.new))
    d = diff_builds(old, new)
    if args.json:
        print(json.dumps(diff_data(d, most=args.most), default=str, indent=1))
        return 0
    pages = explorer_pages(Path(args.new))
    for line in diff_lines(d, query_link=pages.get, most=args.most):
        print(line)
    return 0
