"""Soft judgments as measurements: strengths from a judge's P(first shown is better).

With d = logit(p), a judgment is a noisy measurement of the strength difference, d ≈ s_first −
s_second + b + ε (b: a learned position bias, ε Gaussian). The estimate is the Gaussian product of
experts of Liusie et al. (2024): with a weak Gaussian prior on the strengths, a least-squares
problem with a closed-form solution and a closed-form posterior covariance (which the
`efficient` tournament policy pairs by). A judge without probabilities gives no such
measurement: then the strengths are Bradley–Terry's on the decisions.
"""

from __future__ import annotations

import functools

import numpy as np

from saber_assets.ratings.bradley_terry import Prior, fit

P_CLIP = 1e-4  # logit(1 - 1e-4) ≈ 9.2: a certain answer is a strong, finite measurement


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=np.float64), P_CLIP, 1 - P_CLIP)
    return np.log(p / (1 - p))


def fit_soft(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    d: np.ndarray,
    prior: float = 0.05,
    bias_prior: float = 1.0,
) -> tuple[np.ndarray, float, np.ndarray]:
    """Posterior mean strengths (centred), position bias, and the strengths' covariance (in
    units of the noise variance) from measurements d ≈ s[first] − s[second] + b."""
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    d = np.asarray(d, dtype=np.float64)
    m = n + 1  # strengths, then the bias
    a = np.zeros((m, m))
    rhs = np.zeros(m)
    if len(d):
        np.add.at(a, (first, first), 1.0)
        np.add.at(a, (second, second), 1.0)
        np.add.at(a, (first, second), -1.0)
        np.add.at(a, (second, first), -1.0)
        np.add.at(a, (first, n), 1.0)
        np.add.at(a, (n, first), 1.0)
        np.add.at(a, (second, n), -1.0)
        np.add.at(a, (n, second), -1.0)
        a[n, n] += len(d)
        np.add.at(rhs, first, d)
        np.add.at(rhs, second, -d)
        rhs[n] = d.sum()
    a[np.arange(n), np.arange(n)] += prior
    a[n, n] += bias_prior
    with _one_blas_thread():
        cov = np.linalg.inv(a)
    x = cov @ rhs
    s = x[:n] - x[:n].mean()
    return s, float(x[n]), cov[:n, :n]


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread():
    """A (151×151) inverse is 3× faster on one BLAS thread than on several fighting for 2 cores,
    and the engine inverts one per query and round."""
    return _controller().limit(limits=1, user_api="blas")


def is_soft(p: np.ndarray) -> bool:
    """Probabilities that carry more than the decision (not all 0 / 1)."""
    p = np.asarray(p, dtype=np.float64)
    return bool(len(p)) and bool(np.any((p > 1e-9) & (p < 1 - 1e-9)))


def estimate_strengths(
    n: int, first, second, p_first, winners_losers: list[tuple[int, int]], prior: Prior
) -> np.ndarray:
    """Strengths from a query's judgments: the soft estimate where probabilities exist, else
    Bradley–Terry on the decisions."""
    if is_soft(p_first):
        return fit_soft(n, first, second, logit(p_first))[0]
    return fit(n, winners_losers, prior)
