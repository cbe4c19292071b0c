"""Two builds of the same config, compared table by table: did a change keep every output?

    uv run python perf/same_outputs.py BEFORE AFTER   # two outputs folders (<home>/<name>)

Compared: the relevance thresholds, the candidate lists, the tournament's judgments, the
ratings, the pair signals' row summaries (the arrays), every retriever's runs (per query and
setting: scores, nDCG, full-corpus figures) and the leaderboard with its significance table.
Columns that time or identify code (latency, seconds, code versions, run keys) are left out,
and named. Exit status 1 when any table differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import polars as pl

IGNORED = {"latency_ms", "median_latency_ms", "code_version", "run_key", "row_id", "seconds"}


def _frame(path: Path) -> pl.DataFrame:
    frame = pl.read_parquet(path) if path.is_file() else pl.read_parquet(path / "**/*.parquet")
    keep = [c for c in frame.columns if c not in IGNORED and "seconds" not in c]
    frame = frame.select(keep)
    sortable = [c for c in keep if not isinstance(frame.schema[c], pl.List | pl.Struct)]
    return frame.sort(sortable) if sortable else frame


def compare_tables(before: Path, after: Path) -> list[tuple[str, str]]:
    """(table, "identical" or what differs) for every table both builds hold."""
    tables = [
        ("relevance_thresholds", "parquet/relevance_thresholds.parquet"),
        ("query_candidates", "parquet/query_candidates"),
        ("tournament_judgments", "parquet/tournament_judgments"),
        ("relevance_ratings", "parquet/relevance_ratings"),
        ("leaderboard", "leaderboard/leaderboard.parquet"),
        ("significance", "leaderboard/significance.parquet"),
    ]
    tables += [
        (f"runs/{p.parent.name}/{p.name}", str(p.relative_to(before)))
        for p in sorted((before / "runs").glob("*/*.parquet"))
    ]
    out = []
    for name, rel in tables:
        a, b = before / rel, after / rel
        if not b.exists():
            out.append((name, "missing after"))
            continue
        fa, fb = _frame(a), _frame(b)
        if fa.columns != fb.columns:
            out.append((name, f"columns {fa.columns} vs {fb.columns}"))
        elif fa.equals(fb):
            out.append((name, f"identical ({fa.height:,} rows)"))
        else:
            cols = [c for c in fa.columns if fa.height != fb.height or not fa[c].equals(fb[c])]
            out.append((name, f"differs in {cols} ({fa.height:,} vs {fb.height:,} rows)"))
    summaries = sorted((before / "signals").glob("*.summary.npz"))
    same = all(
        np.array_equal(np.load(p)["summary"], np.load(after / "signals" / p.name)["summary"])
        for p in summaries
    )
    out.append(
        ("pair signal summaries", f"{'identical' if same else 'differ'} ({len(summaries)} shards)")
    )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    rows = compare_tables(args.before, args.after)
    runs = [r for r in rows if r[0].startswith("runs/")]
    for name, verdict in [r for r in rows if not r[0].startswith("runs/")]:
        print(f"| {name} | {verdict} |")
    same_runs = sum(v.startswith("identical") for _, v in runs)
    print(f"| runs ({len(runs)} retriever × domain files) | {same_runs} identical |")
    for name, verdict in runs:
        if not verdict.startswith("identical"):
            print(f"|   {name} | {verdict} |")
    print(f"left out: {', '.join(sorted(IGNORED))} and every column naming seconds")
    return 0 if all(v.startswith("identical") for _, v in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
