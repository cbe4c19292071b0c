"""Do the board's decisions turn on the randomization test's seed?

For each board (a built home's runs, per setting; and a synthetic board of 40 systems, 780
pairs), the paired tests are run with five seeds twice: with the flips fixed at
``leaderboard.test_resamples`` (the old board), and growing near their Holm threshold (the
board now). Printed per board: the `better` decisions and tie groups that differ from the
first seed's, the pairs drawn again and the seconds taken.

    uv run python perf/decisions.py                  # the sample build (.saber/sample)
    uv run python perf/decisions.py --home DIR --name NAME
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.leaderboard.assemble import tie_groups
from saber_assets.leaderboard.significance import MAX_TEST_RESAMPLES, paired_tests, score_matrix

SEEDS = (1, 2, 3, 4, 5)


def boards_of(home: Path) -> dict[str, tuple[list[str], np.ndarray]]:
    """setting -> (systems, queries × systems nDCG) of a built home's runs (none without)."""
    files = sorted((home / "runs").glob("*/*.parquet"))
    if not files:
        return {}
    runs = pl.concat(
        [
            pl.read_parquet(f, columns=["query_id", "setting", "ndcg"]).with_columns(
                retriever=pl.lit(f.parent.name)
            )
            for f in files
        ]
    )
    out = {}
    for setting in sorted(runs["setting"].unique().to_list()):
        _, names, m = score_matrix(runs, setting)
        out[setting] = (names, m)
    return out


def synthetic(k: int = 40, n: int = 100, gap: float = 0.004, seed: int = 0):
    """k systems on n queries, neighbours ``gap`` apart in mean: many pairs near their threshold."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.2, 0.8, size=(n, 1))
    m = base + gap * np.arange(k)[None, :] + 0.05 * rng.standard_normal((n, k))
    return [f"s{i:02d}" for i in range(k)], np.clip(m, 0, 1)


def decisions(names, m, seed: int, resamples: int, grow: bool):
    t0 = time.perf_counter()
    t = paired_tests(
        m, names, resamples, seed, max_resamples=MAX_TEST_RESAMPLES if grow else resamples
    )
    seconds = time.perf_counter() - t0
    board = pl.DataFrame({"setting": "s", "retriever": names, "ndcg@10": m.mean(axis=0)})
    groups = tie_groups(board, t.with_columns(setting=pl.lit("s"), domain=pl.lit("Overall")),
                        "ndcg@10")  # fmt: skip
    better = dict(zip(zip(t["a"], t["b"], strict=True), t["better"], strict=True))
    grouped = dict(groups.select("retriever", "tie_group").iter_rows())
    return better, grouped, int((t["randomization_resamples"] > resamples).sum()), seconds


def measure(label: str, names, m, resamples: int) -> None:
    for grow in (False, True):
        runs = [decisions(names, m, s, resamples, grow) for s in SEEDS]
        first_b, first_g = runs[0][0], runs[0][1]
        flips = [sum(b[p] != first_b[p] for p in first_b) for b, *_ in runs[1:]]
        moved = [sum(g[x] != first_g[x] for x in first_g) for _, g, *_ in runs[1:]]
        separable = sum(v is not None for v in first_b.values())
        print(
            f"{label:<28} {'growing' if grow else 'fixed':<8} pairs {len(first_b):>4} "
            f"separable {separable:>4}  decisions differing from seed 1: {flips}  "
            f"tie groups moved: {moved}  pairs drawn again: {[r[2] for r in runs]}  "
            f"seconds: {[round(r[3], 1) for r in runs]}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=".saber", help="SABER_HOME of a finished build")
    parser.add_argument("--name", default="sample", help="the build's config name")
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--systems", type=int, default=40, help="a synthetic board (0: none)")
    args = parser.parse_args()
    for setting, (names, m) in boards_of(Path(args.home) / args.name).items():
        measure(f"{args.name} {setting} ({len(names)})", names, m, args.resamples)
    if args.systems:
        names, m = synthetic(args.systems)
        measure(f"synthetic ({args.systems} systems)", names, m, args.resamples)


if __name__ == "__main__":
    main()
