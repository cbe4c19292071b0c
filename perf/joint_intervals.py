"""The joint bootstrap (queries × the judgments' grades) at the full config, and its coverage.

    uv run python perf/joint_intervals.py [--queries 1000] [--systems 40] [--draws 1000]
                                                [--coverage 200]

Speed: a synthetic benchmark of the full config's shape (150 candidates, 20 Swiss rounds of
judgments per query, three settings of ``--systems`` retrievers) through ``joint.joint_board``:
the Bradley–Terry refits, the posterior factors, the draws and the nDCG of every system on every
draw. Printed beside the query-only bootstrap of the same size measured in the same run (the
ratio is what carrying the judge's noise costs).

Coverage: ``joint_coverage.coverage`` — the joint, query-only and percentile intervals' coverage
of the true nDCG differences on ``--coverage`` simulated benchmarks, for a noisy judge (κ = 1)
and a sharp one (κ = 3).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from saber_assets.benchmark.data import JUDGMENT_SCHEMA, QUERY_SCHEMA, Benchmark
from saber_assets.leaderboard.joint import (
    grade_posteriors,
    joint_board,
    rankings,
    rounds_resolution,
)
from saber_assets.leaderboard.joint_coverage import coverage
from saber_assets.ratings.bradley_terry import rescale
from saber_assets.runs.metrics import bootstrap_means

SETTINGS = ("statement-full", "statement-only", "solution-only")


def synthetic(queries: int, systems: int, candidates: int = 150, rounds: int = 20, seed: int = 0):
    """(runs, judgments per query, relevance): random pairs judged under BT with N(0,1) strengths,
    systems scoring by strength + noise of their own size."""
    rng = np.random.default_rng(seed)
    problems, rows = [], []
    for q in range(queries):
        theta = rng.standard_normal(candidates)
        # each round a random perfect matching (Swiss pairs too, by standings; the count is the
        # same: candidates / 2 judgments per round)
        a, b = np.concatenate([rng.permutation(candidates).reshape(2, -1) for _ in range(rounds)], axis=1)  # fmt: skip
        first_wins = rng.random(a.size) < 1 / (1 + np.exp(theta[b] - theta[a]))
        problems.append((candidates, list(zip(np.where(first_wins, a, b).tolist(),
                                              np.where(first_wins, b, a).tolist(), strict=True))))  # fmt: skip
        for setting in SETTINGS:
            for s in range(systems):
                noise = 0.5 + 2.0 * s / max(systems - 1, 1)
                rows.append((f"s{s:02d}", f"q{q:04d}", setting, False,
                             (theta + noise * rng.standard_normal(candidates)).tolist()))  # fmt: skip
    runs = pl.DataFrame(
        rows, orient="row",
        schema={"retriever": pl.String, "query_id": pl.String, "setting": pl.String,
                "failed": pl.Boolean, "scores": pl.List(pl.Float64)},
    )  # fmt: skip
    return runs, problems


def as_benchmark(problems: list, relevance: dict[str, list[float]]) -> Benchmark:
    """The synthetic as an exchange-format benchmark (every query's candidates the first
    documents; each round's judgments numbered in order) for ``joint.rounds_resolution``."""
    n = problems[0][0]
    per_round = n // 2
    judged = [
        (q, k // per_round + 1, w, lo, w, None)
        for q, (_, comps) in zip(relevance, problems, strict=True)
        for k, (w, lo) in enumerate(comps)
    ]
    queries = pl.DataFrame(
        {"id": list(relevance), "problem": ["q"] * len(relevance), "solution": ["s"] * len(relevance),
         "candidates": [list(range(n))] * len(relevance), "relevance_scores": list(relevance.values()),
         "domains": [["D"]] * len(relevance)},
        schema=QUERY_SCHEMA,
    )  # fmt: skip
    docs = pl.DataFrame({"id": [f"d{i}" for i in range(n)], "problem": ["p"] * n, "solution": ["s"] * n})  # fmt: skip
    return Benchmark(queries, docs, {}, judgments=pl.DataFrame(judged, schema=JUDGMENT_SCHEMA, orient="row"))  # fmt: skip


def separable(runs: pl.DataFrame, relevance: dict, board, systems: int) -> None:
    """Pairs the query-only randomization test (1,000 resamples, Holm) separates per setting,
    beside the joint test's."""
    from saber_assets.leaderboard.significance import paired_tests, score_matrix
    from saber_assets.runs.metrics import ndcg_at_k

    t0 = time.perf_counter()
    scored = runs.with_columns(
        ndcg=pl.struct("query_id", "scores").map_elements(
            lambda r: ndcg_at_k(r["scores"], relevance[r["query_id"]]), return_dtype=pl.Float64
        )
    )
    for setting in SETTINGS:
        _, names, m = score_matrix(scored, setting)
        t = paired_tests(m, names, resamples=1000)
        q = t["better"].is_not_null().sum()
        q_t = (t["p_ttest_holm"] < 0.05).sum()
        j = board.tests.filter(pl.col("setting") == setting)["better_joint"].is_not_null().sum()
        print(f"  {setting}: separable pairs over the queries {q} by the randomization test, "
              f"{q_t} by the paired t-test; {j} with the judgments; of {len(t)}")  # fmt: skip
    print(f"  (query-only tests: {time.perf_counter() - t0:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--systems", type=int, default=40)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--coverage", type=int, default=200, help="simulations (0: skip)")
    ap.add_argument("--coverage-queries", type=int, default=60, help="queries per simulation")
    ap.add_argument("--coverage-candidates", type=int, default=60)
    ap.add_argument("--coverage-rounds", type=int, default=10)
    ap.add_argument("--separable", action="store_true", help="count separable pairs both ways")
    ap.add_argument("--rounds-curve", action="store_true", help="refit on the first r rounds")
    args = ap.parse_args()
    runs, problems = synthetic(args.queries, args.systems)
    t0 = time.perf_counter()
    posteriors = grade_posteriors(problems)
    fit_s = time.perf_counter() - t0
    qids = [f"q{q:04d}" for q in range(args.queries)]
    relevance = {q: rescale(p.theta).tolist() for q, p in zip(qids, posteriors, strict=True)}
    t0 = time.perf_counter()
    ranked = rankings(runs, {q: 150 for q in qids})
    board = joint_board(ranked, dict(zip(qids, posteriors, strict=True)), relevance,
                        resamples=args.draws)  # fmt: skip
    joint_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in SETTINGS:  # the board's query-only bootstrap, same size
        bootstrap_means(np.random.default_rng(0).random((args.queries, args.systems)), args.draws)
    query_s = time.perf_counter() - t0
    print(f"{args.queries} queries x 150 candidates, {len(SETTINGS)} x {args.systems} systems, "
          f"{args.draws} draws")  # fmt: skip
    print(f"  Bradley-Terry refits + posterior factors: {fit_s:.1f} s")
    print(f"  joint bootstrap (draws, nDCG, intervals, tests): {joint_s:.1f} s")
    print(f"  total {fit_s + joint_s:.1f} s; query-only bootstrap alone {query_s:.2f} s")
    share = board.rows["judge_noise_share"]
    print(f"  judge-noise share of width: median {share.median():.2f}, max {share.max():.2f}")
    if args.separable:
        separable(runs, relevance, board, args.systems)
    if args.rounds_curve:
        t0 = time.perf_counter()
        curve = rounds_resolution(as_benchmark(problems, relevance), ranked, resamples=200)
        print(f"rounds vs resolution (refit on the first r rounds, 200 draws), "
              f"{time.perf_counter() - t0:.0f} s:")  # fmt: skip
        with pl.Config(tbl_rows=100, tbl_hide_dataframe_shape=True):
            print(curve.group_by("rounds", maintain_order=True).agg(
                pl.col("separable_joint").sum(), pl.col("pairs").sum(),
                pl.col("mean_width_joint").mean().round(4),
            ))  # fmt: skip
    if args.coverage:
        for kappa in (1.0, 3.0):
            t0 = time.perf_counter()
            c = coverage(simulations=args.coverage, queries=args.coverage_queries,
                         candidates=args.coverage_candidates, rounds=args.coverage_rounds,
                         kappa=kappa)  # fmt: skip
            print(f"coverage, judge kappa={kappa}: joint {c.joint:.3f}, query-only "
                  f"{c.query_only:.3f}, percentile on the joint draws {c.joint_percentile:.3f}; "
                  f"pairs ordered the wrong way: joint {c.wrong_order_joint:.3f}, query-only "
                  f"{c.wrong_order_query_only:.3f}; each system's true level: joint "
                  f"{c.level_joint:.3f}, query-only {c.level_query_only:.3f}, mean error of "
                  f"the raw score {c.error_raw:.4f}, of the judge-corrected one "
                  f"{c.error_corrected:.4f} "
                  f"({c.cells} cells, {time.perf_counter() - t0:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
