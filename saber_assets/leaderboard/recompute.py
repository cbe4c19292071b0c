"""verify's own arithmetic, apart from what it checks (``verify.py``, ``verify_fill.py``):
Bradley–Terry by scikit-learn's logistic regression, nDCG by scikit-learn or written out, the
bootstrap from the board's seeded draws, the paired tests by scipy, Holm written out, and how
near a Monte-Carlo p lies to its threshold. None of it imports the code it checks."""

from __future__ import annotations

import math

import numpy as np


def bt_strengths_sklearn(n: int, wins: list[tuple[int, int]], ties: list[tuple[int, int]],
                         c: float) -> np.ndarray:  # fmt: skip
    """Bradley–Terry strengths maximising Σ log σ(θ_w − θ_l) − ½‖θ‖²/C, by scikit-learn's
    logistic regression without intercept: each outcome is two mirrored rows of half its
    weight (a tie: two half-weight outcomes, one each way), so both classes are present and
    each game counts once."""
    # at use: scikit-learn's linear models (0.24 s) and scipy.stats (0.4 s) would load in every
    # run worker's start (the build's definitions import this module through verification)
    from sklearn.linear_model import LogisticRegression

    games = [(w, lo, 1.0) for w, lo in wins] + [
        g for a, b in ties for g in ((a, b, 0.5), (b, a, 0.5))
    ]
    if not games:
        return np.zeros(n)
    x = np.zeros((2 * len(games), n))
    y = np.tile([1, 0], len(games))
    weight = np.repeat([g[2] / 2 for g in games], 2)
    for k, (w, lo, _) in enumerate(games):
        x[2 * k, w], x[2 * k, lo] = 1.0, -1.0
        x[2 * k + 1, w], x[2 * k + 1, lo] = -1.0, 1.0
    model = LogisticRegression(C=c, fit_intercept=False, tol=1e-12, max_iter=10_000)
    model.fit(x, y, sample_weight=weight)
    return model.coef_[0]


def min_max(strengths: np.ndarray) -> np.ndarray:
    """Strengths to [0, 5], all-equal ones to 2.5 (the exchange format's rescale)."""
    lo, hi = float(strengths.min()), float(strengths.max())
    if hi - lo < 1e-12:
        return np.full(len(strengths), 2.5)
    return 5.0 * (strengths - lo) / (hi - lo)


def ndcg_in_order(scores: np.ndarray, grades: np.ndarray, k: int) -> float:
    """nDCG@k with tied scores in the order ``numpy.argsort(-scores)`` leaves them (the board's
    ``ties: order``, the reference code's), the gain 2^rel − 1; 0 where every grade is 0."""
    gain = np.power(2.0, np.asarray(grades, dtype=np.float64)) - 1.0
    ranked = gain[np.argsort(-np.asarray(scores, dtype=np.float64))][:k]
    ideal = np.sort(gain)[::-1][:k]
    discount = 1.0 / np.log2(np.arange(2, len(ranked) + 2))
    best = float(ideal @ discount[: len(ideal)])
    return float(ranked @ discount) / best if best > 0 else 0.0


def ndcg_sklearn(scores: np.ndarray, grades: np.ndarray, k: int) -> float:
    """nDCG@k by scikit-learn (ties averaged), the gain 2^rel − 1 given as the relevance; 0
    where every grade is 0."""
    from sklearn.metrics import ndcg_score  # at use: see bt_strengths_sklearn

    gain = np.power(2.0, np.asarray(grades, dtype=np.float64)) - 1.0
    if len(gain) < 2:  # scikit-learn needs two documents; one is ranked first, whatever
        return 1.0 if len(gain) and gain[0] > 0 else 0.0
    if not gain.max() > 0:
        return 0.0
    return float(ndcg_score(gain[None, :], np.asarray(scores)[None, :], k=k, ignore_ties=False))


def wilson(k: int, n: int) -> tuple[float, float]:
    """scipy's Wilson score interval (95%) of k successes in n."""
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import binomtest  # at use: as scikit-learn (bt_strengths_sklearn)

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def seeded_interval(values: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """The board's percentile interval of the mean from its seeded query draws (numpy's
    ``default_rng(seed).integers``, resamples × queries)."""
    if len(values) == 0:
        return float("nan"), float("nan")
    draws = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    lo, hi = np.quantile(values[draws].mean(axis=1), [0.025, 0.975])
    return float(lo), float(hi)


def t_test_p(d: np.ndarray) -> float:
    """Two-sided paired t-test p from its formula (scipy's t distribution): 1 for no difference,
    0 for a constant one."""
    n = len(d)
    if n < 2 or np.all(d == 0):
        return 1.0
    sd = float(np.std(d, ddof=1))
    if sd <= 1e-12 * max(1.0, float(np.abs(d).max())):
        return 0.0
    stat = float(np.mean(d)) / (sd / math.sqrt(n))
    from scipy.stats import t as student_t  # at use: as scikit-learn (bt_strengths_sklearn)

    return float(2 * student_t.sf(abs(stat), n - 1))


def sign_flip_p(d: np.ndarray, flips: int, seed: int) -> float:
    """The two-sided sign-flip p of the paired differences ``d`` by scipy's
    ``permutation_test`` (permutation type "samples": each pair's two values swapped at random),
    ``flips`` seeded resamples; the board counts its own (``significance.randomization_p``)."""
    d = np.asarray(d, dtype=np.float64)
    if len(d) == 0 or np.all(d == 0):
        return 1.0
    from scipy.stats import permutation_test  # at use: as scikit-learn (bt_strengths_sklearn)

    res = permutation_test(
        (d, np.zeros_like(d)), lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples", n_resamples=flips, alternative="two-sided", vectorized=True,
        rng=np.random.default_rng([seed, len(d), 11]),
        batch=max(1, min(flips, 4_000_000 // len(d))),
    )  # fmt: skip
    return float(res.pvalue)


def holm_adjusted(p: list[float]) -> list[float]:
    """Holm's step-down adjustment, written out: the i-th smallest of m times (m − i), running
    maximum, capped at 1."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, p[i] * (m - rank)))
        out[i] = running
    return out


def near_alpha(p: list[float], flips: list[int], alpha: float, z: float = 3.0) -> list[bool]:
    """Which p-values lie within ``z`` of verify's own Monte-Carlo standard errors of the
    threshold Holm holds them to (α / (m − rank)): their decision could turn on the draw."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [False] * m
    for rank, i in enumerate(order):
        threshold = alpha / (m - rank)
        # the error at the larger of p and the threshold: a low estimate claims too small a one
        q = min(max(max(p[i], threshold) / 2, 1.0 / flips[i]), 0.5)
        out[i] = abs(p[i] - threshold) < z * 2 * math.sqrt(q * (1 - q) / flips[i])
    return out


def monte_carlo_tolerance(p: float, *flips: int) -> float:
    """Five standard errors of the difference of two-sided Monte-Carlo p-values drawn with
    ``flips`` each, plus one draw's step. The p is twice a tail's share q = p / 2, so its
    standard error is 2·√(q(1 − q)/flips): at p = 0.95 and 10,000 flips 0.01, not the 0.002 a
    share of p would have."""
    q = min(max(p / 2, 1 / max(flips)), 0.5)
    return 5 * 2 * math.sqrt(q * (1 - q) * sum(1 / f for f in flips)) + 2 / min(flips)
