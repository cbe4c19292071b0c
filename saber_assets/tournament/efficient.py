"""The `efficient` tournament policy (beyond the paper; Swiss stays the default).

Soft judgments: a judge that exposes P(first shown is better) = p gives, with d = logit(p), a
noisy measurement of the strength difference, d ≈ s_first − s_second + b + ε (b: a learned
position bias, ε Gaussian). The estimate is the Gaussian product of experts of Liusie et al.
(2024): with a weak Gaussian prior on the strengths, a least-squares problem with a closed-form
solution and a closed-form posterior covariance Σ. The next comparisons are the ones that tell
the most about the ranking: greedily, the unplayed pairs whose difference is most uncertain,
Var(s_i − s_j) = Σii + Σjj − 2Σij, as a matching (each candidate at most once per round).

Assumes the judge's log-odds are roughly linear in the strength difference with Gaussian noise
(they are, for a calibrated judge). A judge without probabilities (binary outcomes only) gives no
such measurement: then this policy pairs exactly like Swiss, and estimates by Bradley–Terry.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from saber_assets.ratings.soft import fit_soft, is_soft, logit
from saber_assets.tournament.swiss import pair_round


def pair_round_efficient(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    p_first: np.ndarray,
    wins: np.ndarray,
    played: set[frozenset[int]],
    rng: np.random.Generator,
) -> list[tuple[int, int]]:
    """One round: a matching of the unplayed pairs with the most uncertain differences (soft
    judgments), or Swiss pairing when the judgments so far are binary (or there are none)."""
    if not is_soft(p_first):
        return pair_round(wins, played, rng)
    _, _, cov = fit_soft(n, first, second, logit(p_first))
    mask = np.zeros((n, n), dtype=np.bool_)
    if played:
        idx = np.array([tuple(p) for p in played], dtype=np.int64)
        mask[idx[:, 0], idx[:, 1]] = mask[idx[:, 1], idx[:, 0]] = True
    noise = rng.random((n, n))  # seeded tie-breaking
    return [(int(i), int(j)) for i, j in _most_uncertain_matching(cov, mask, noise)]


@njit(cache=True)
def _most_uncertain_matching(cov, played, noise):  # pragma: no cover - compiled
    """Greedy matching over the unplayed pairs by decreasing Var(s_i − s_j) = Σii + Σjj − 2Σij
    (each candidate at most once)."""
    n = cov.shape[0]
    m = n * (n - 1) // 2
    key = np.empty(m)
    left = np.empty(m, dtype=np.int64)
    right = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(n):
        for j in range(i + 1, n):
            if not played[i, j]:
                key[k] = -(cov[i, i] + cov[j, j] - 2 * cov[i, j] + noise[i, j] * 1e-9)
                left[k], right[k] = i, j
                k += 1
    order = np.argsort(key[:k])  # ties are broken by the noise
    free = np.ones(n, dtype=np.bool_)
    out = np.empty((n // 2, 2), dtype=np.int64)
    c = 0
    for t in order:
        if c == n // 2:
            break
        i, j = left[t], right[t]
        if free[i] and free[j]:
            out[c, 0], out[c, 1] = i, j
            free[i] = free[j] = False
            c += 1
    return out[:c]
