"""Swiss pairing (DESIGN.md, tournament): pure, seeded.

Round 1 is the call with all-zero wins and no games played: a random perfect matching. Every
round: shuffle, stable-sort by wins, then from the lowest-scoring unpaired candidate pick the
unpaired opponent with the closest win count that it has not met (ties: the earlier in that
order); a candidate with no such opponent sits out this round (no point).
"""

from __future__ import annotations

import numpy as np


def pair_round(
    wins: np.ndarray, played: set[frozenset[int]], rng: np.random.Generator
) -> list[tuple[int, int]]:
    wins = np.asarray(wins)
    order = rng.permutation(len(wins))
    order = order[np.argsort(wins[order], kind="stable")]
    return greedy_closest(order, wins[order].astype(np.float64), played)


def greedy_closest(
    order: np.ndarray, keys: np.ndarray, played: set[frozenset[int]]
) -> list[tuple[int, int]]:
    """Greedy matching over candidates sorted by ``keys`` (ascending, aligned with ``order``):
    the lowest unpaired candidate meets the unpaired, not-yet-met one with the closest key."""
    n = len(order)
    free = np.ones(n, dtype=bool)
    pairs: list[tuple[int, int]] = []
    for p in range(n):
        if not free[p]:
            continue
        free[p] = False
        a = int(order[p])
        best, best_gap = -1, np.inf
        for q in range(p + 1, n):
            if not free[q]:
                continue
            gap = keys[q] - keys[p]
            if gap >= best_gap:
                break  # keys are sorted: later candidates are no closer
            if frozenset((a, int(order[q]))) not in played:
                best, best_gap = q, gap
        if best >= 0:
            free[best] = False
            pairs.append((a, int(order[best])))
    return pairs


def pair_round_random(n: int, played: set[frozenset[int]], rng: np.random.Generator):
    """A random matching of candidates that have not met (the baseline policy)."""
    order = rng.permutation(n)
    return greedy_closest(order, np.zeros(n), played)
