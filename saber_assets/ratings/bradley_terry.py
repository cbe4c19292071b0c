"""Bradley–Terry strengths from pairwise judgments, and the [0, 5] rescale.

Two priors on the strengths θ, both maximised by the same batched damped Newton (see
``fit_many``): ~10 iterations instead of the thousands an MM iteration needs on Swiss data,
which matters for 1000 queries and for the adaptive policies, which refit every round.

- ``l2`` (default, as the published ratings were made): the authors' reference fits θ with
  scikit-learn's ``LogisticRegression(C, fit_intercept=False)`` on ±1 design rows, i.e. it
  maximises Σ log σ(θ_w − θ_l) − ½‖θ‖²/C, a Gaussian prior (tested against scikit-learn).
- ``choix``: the fixed point of ``choix.mm_pairwise`` with prior ``alpha``, i.e. the maximiser of
  Σ log σ(θ_w − θ_l) + α Σ (θ_i − e^θ_i), centred like choix's (tested against choix).

Either way a candidate that never played keeps the prior and an undefeated one stays finite.
A tie counts as two half-weight outcomes, one each way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

DEFAULT_ALPHA = 0.1


@dataclass(frozen=True)
class Prior:
    """The prior of a Bradley–Terry fit: ``l2`` with scikit-learn's ``c`` (larger = weaker), or
    ``choix`` with its ``alpha`` (larger = stronger)."""

    kind: Literal["l2", "choix"] = "l2"
    c: float = 1.0
    alpha: float = DEFAULT_ALPHA

    def __post_init__(self) -> None:
        if self.kind not in ("l2", "choix"):
            raise ValueError(f"Bradley–Terry prior must be 'l2' or 'choix', not {self.kind!r}")
        if self.kind == "l2" and not self.c > 0:
            raise ValueError("l2 prior: c must be > 0 (c = 0 would fix every strength at 0)")
        if self.kind == "choix" and not self.alpha > 0:
            raise ValueError("alpha must be > 0: with alpha = 0 undefeated candidates diverge")

    def describe(self) -> str:
        return f"l2 (C = {self.c:g})" if self.kind == "l2" else f"choix (alpha = {self.alpha:g})"


DEFAULT_PRIOR = Prior()

Pair = tuple[int, int]


def fit(
    n_items: int,
    comparisons: Sequence[Pair],
    prior: Prior = DEFAULT_PRIOR,
    ties: Sequence[Pair] = (),
) -> np.ndarray:
    """Strengths (higher = more relevant) from (winner, loser) pairs and tied pairs."""
    return fit_many([(n_items, comparisons)], prior, ties=[ties])[0]


def fit_many(
    problems: Sequence[tuple[int, Sequence[Pair]]],
    prior: Prior = DEFAULT_PRIOR,
    tol: float = 1e-10,
    max_iter: int = 100,
    ties: Sequence[Sequence[Pair]] | None = None,
) -> list[np.ndarray]:
    """Fit many queries at once: damped Newton with each query's n×n Hessian, queries of equal
    size solved as one batch. ``ties[k]``: the tied pairs of ``problems[k]``."""
    if not isinstance(prior, Prior):
        raise TypeError(f"prior must be a Prior, not {type(prior).__name__}")
    out: list[np.ndarray | None] = [None] * len(problems)
    by_size: dict[int, list[int]] = {}
    for k, (n, _) in enumerate(problems):
        by_size.setdefault(n, []).append(k)
    for n, ks in by_size.items():
        for start in range(0, len(ks), 256):
            batch = ks[start : start + 256]
            games = [_weighted(problems[k][1], ties[k] if ties else ()) for k in batch]
            thetas = _newton_batch(n, games, prior, tol, max_iter)
            for k, th in zip(batch, thetas, strict=True):
                out[k] = th - th.mean() if prior.kind == "choix" else th
    return out  # type: ignore[return-value]


def _weighted(comparisons: Sequence[Pair], ties: Sequence[Pair]) -> np.ndarray:
    """(winner, loser, weight) rows: a decision weighs 1, a tie two rows of ½."""
    rows = [(w, lo, 1.0) for w, lo in comparisons]
    rows += [r for a, b in ties for r in ((a, b, 0.5), (b, a, 0.5))]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def prior_terms(theta: np.ndarray, prior: Prior):
    """The prior's log-density (per query), gradient and Hessian diagonal (negated)."""
    if prior.kind == "l2":
        return -0.5 * (theta**2).sum(axis=1) / prior.c, -theta / prior.c, 1.0 / prior.c
    ex = np.exp(theta)
    a = prior.alpha
    return a * (theta - ex).sum(axis=1), a - a * ex, a * ex


def _objective(theta, q, w, lo, wt, prior):
    diff = theta[q, w] - theta[q, lo]
    ll = np.bincount(q, weights=-wt * np.logaddexp(0.0, -diff), minlength=theta.shape[0])
    return ll + prior_terms(theta, prior)[0]


def _neg_hessian(b: int, n: int, q, w, lo, pq, curv) -> np.ndarray:
    """The objective's negative Hessian per query (b × n × n, positive definite): the games'
    Fisher information plus the prior's curvature."""
    hess = np.zeros((b, n, n))
    np.add.at(hess, (q, w, w), pq)
    np.add.at(hess, (q, lo, lo), pq)
    np.add.at(hess, (q, w, lo), -pq)
    np.add.at(hess, (q, lo, w), -pq)
    diag = np.arange(n)
    hess[:, diag, diag] += curv
    return hess


def information(
    n_items: int, comparisons: Sequence[Pair], theta: np.ndarray, prior: Prior = DEFAULT_PRIOR,
    ties: Sequence[Pair] = (),
) -> np.ndarray:  # fmt: skip
    """The negative Hessian of the fit's log-posterior at ``theta`` (n × n): the inverse of the
    Laplace approximation's covariance of the strengths around the fitted ones."""
    rows = _weighted(comparisons, ties)
    w, lo, wt = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2]
    theta = np.asarray(theta, dtype=np.float64)[None, :]
    q = np.zeros(len(rows), dtype=np.int64)
    p_w = 1.0 / (1.0 + np.exp(theta[q, lo] - theta[q, w]))
    curv = prior_terms(theta, prior)[2]
    return _neg_hessian(1, n_items, q, w, lo, wt * p_w * (1.0 - p_w), curv)[0]


def _newton_batch(n: int, games: list[np.ndarray], prior: Prior, tol: float, max_iter: int):
    b = len(games)
    q = np.concatenate([np.full(len(g), k, dtype=np.int64) for k, g in enumerate(games)])
    rows = np.concatenate(games) if games else np.zeros((0, 3))
    w, lo, wt = rows[:, 0].astype(np.int64), rows[:, 1].astype(np.int64), rows[:, 2]
    theta = np.zeros((b, n))
    f = _objective(theta, q, w, lo, wt, prior)
    for _ in range(max_iter):
        p_w = 1.0 / (1.0 + np.exp(theta[q, lo] - theta[q, w]))  # P(winner beats loser)
        pq = wt * p_w * (1.0 - p_w)
        _, grad, curv = prior_terms(theta, prior)
        grad = grad.copy()
        np.add.at(grad, (q, w), wt * (1.0 - p_w))
        np.add.at(grad, (q, lo), -wt * (1.0 - p_w))
        hess = _neg_hessian(b, n, q, w, lo, pq, curv)
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        t = np.ones(b)
        for _ls in range(30):  # backtracking: never decrease the objective
            cand = theta + t[:, None] * step
            fc = _objective(cand, q, w, lo, wt, prior)
            bad = fc < f - 1e-12
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        theta, f = cand, fc
        if np.abs(t[:, None] * step).max() < tol:
            return list(theta)
    raise RuntimeError(f"Bradley–Terry did not converge in {max_iter} Newton iterations")


def rescale(strengths: np.ndarray, low: float = 0.0, high: float = 5.0) -> np.ndarray:
    """Min–max to [low, high] per query: a vector is one query's strengths, a matrix one draw of
    a query's strengths per column, each rescaled on its own. All-equal strengths (no
    information) map to the middle.

    The result lies exactly in [low, high] with the extremes hit exactly: floating-point rounding
    (e.g. 5.000000000000001) must never push a rating out of the exchange format's range.
    """
    s = np.asarray(strengths, dtype=np.float64)
    if s.size == 0:
        return s.copy()
    lo, hi = s.min(axis=0), s.max(axis=0)
    flat = hi - lo < 1e-12
    out = np.clip(low + (high - low) * ((s - lo) / np.where(flat, 1.0, hi - lo)), low, high)
    out = np.where(s == lo, low, np.where(s == hi, high, out))
    return np.where(flat, (low + high) / 2, out)
