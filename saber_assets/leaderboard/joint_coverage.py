"""How often the leaderboard's intervals cover the true nDCG differences, on simulated benchmarks.

Each simulated benchmark has ``queries`` queries of ``candidates`` candidates with true
strengths θ ~ N(0, 1); its true grades are θ min–max rescaled to [0, 5], as the ratings are. A
judge of known noise answers a pair (i, j) with P(i wins) = σ(κ(θᵢ − θⱼ)) (smaller κ = noisier
judge) in the project's own Swiss tournament (``tournament.simulate``); the grades are refitted
from its judgments. Each system ranks by θ + N(0, σ²), one σ per system. The truth is the
benchmark's own true difference: the mean over its queries of nDCG@10 on the true grades.

Coverage is counted per (simulation, pair of systems), for the joint interval (``joint``), the
query-only one the board prints beside it, and, for reference, a percentile interval on the
joint draws (which the bias of a noisy judge pushes off the truth).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from saber_assets.leaderboard.joint import grade_posteriors, intervals, joint_draws, reflected
from saber_assets.ratings.bradley_terry import rescale
from saber_assets.runs.metrics import dcg_weights, ndcg_at_k
from saber_assets.tournament.simulate import estimate


@dataclass(frozen=True)
class Coverage:
    joint: float
    query_only: float
    joint_percentile: float
    cells: int  # simulations × pairs
    # share of cells whose interval excludes 0 on the wrong side of the truth: a pair ordered
    # the wrong way round, which a 95% interval should do at most 2.5% of the time
    wrong_order_joint: float = 0.0
    wrong_order_query_only: float = 0.0
    # per (simulation, system): the interval's coverage of the system's own true nDCG, and how
    # far the raw score and the judge-corrected one (2t − mean t*) lie from it on average
    level_joint: float = 0.0
    level_query_only: float = 0.0
    error_raw: float = 0.0
    error_corrected: float = 0.0


def simulated_benchmark(
    sim: int, queries: int, candidates: int, rounds: int, kappa: float, noise: tuple[float, ...]
):
    """(posteriors, DCG weights, fitted grades, true nDCG per query × system) of one benchmark."""
    rng = np.random.default_rng([sim, 7])
    problems, weights, truths = [], [], []
    for q in range(queries):
        theta = rng.standard_normal(candidates)
        scores = [theta + s * rng.standard_normal(candidates) for s in noise]
        judge_rng = np.random.default_rng([sim, q, 11])

        def judge(first, second, theta=theta, judge_rng=judge_rng):
            p = 1.0 / (1.0 + np.exp(-kappa * (theta[first] - theta[second])))
            return (judge_rng.random(len(first)) < p).astype(np.float64)

        trace: list = []
        estimate("swiss", candidates, judge, rounds * (candidates // 2), sim * 100_003 + q,
                 trace=trace, fitted=False)  # the posteriors fit them all at once, below  # fmt: skip
        problems.append((candidates, [(f, s) if p > 0.5 else (s, f) for _, f, s, p in trace]))
        weights.append(np.stack([dcg_weights(s) for s in scores]))
        true_grades = rescale(theta)
        truths.append([ndcg_at_k(s, true_grades) for s in scores])
    posteriors = grade_posteriors(problems)
    fitted = [rescale(p.theta) for p in posteriors]
    return posteriors, weights, fitted, np.asarray(truths)


def coverage(
    simulations: int = 200,
    queries: int = 60,
    candidates: int = 40,
    rounds: int = 8,
    kappa: float = 1.0,
    noise: tuple[float, ...] = (1.0, 1.3, 2.0),
    resamples: int = 400,
    seed: int = 0,
) -> Coverage:
    """The three intervals' coverage of the true differences over ``simulations`` benchmarks."""
    hits, wrong = np.zeros(3), np.zeros(3)
    level, errors = np.zeros(2), np.zeros(2)
    cells = systems = 0
    for sim in range(simulations):
        posteriors, weights, fitted, truths = simulated_benchmark(
            seed * 1_000_003 + sim, queries, candidates, rounds, kappa, noise
        )
        d = joint_draws(posteriors, weights, fitted, resamples, seed + sim)
        truth = truths.mean(axis=0)
        joint_lo, joint_hi = intervals(reflected(d.joint, d.point))
        query_lo, query_hi = intervals(d.query_only)
        level += [np.sum((joint_lo <= truth) & (truth <= joint_hi)),
                  np.sum((query_lo <= truth) & (truth <= query_hi))]  # fmt: skip
        corrected = 2 * d.point - d.joint.mean(axis=0)
        errors += [np.abs(d.point - truth).sum(), np.abs(corrected - truth).sum()]
        systems += len(noise)
        for i, j in combinations(range(len(noise)), 2):
            target = truth[i] - truth[j]
            for n, draws in enumerate((reflected(d.joint, d.point), d.query_only, d.joint)):
                lo, hi = intervals(draws[:, [i]] - draws[:, [j]])
                hits[n] += lo[0] <= target <= hi[0]
                wrong[n] += (lo[0] > 0 and target < 0) or (hi[0] < 0 and target > 0)
            cells += 1
    share, bad = hits / max(cells, 1), wrong / max(cells, 1)
    lv, err = level / max(systems, 1), errors / max(systems, 1)
    return Coverage(
        float(share[0]), float(share[1]), float(share[2]), cells, float(bad[0]), float(bad[1]),
        float(lv[0]), float(lv[1]), float(err[0]), float(err[1]),
    )  # fmt: skip
