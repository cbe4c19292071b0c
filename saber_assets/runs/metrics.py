"""nDCG@k on continuous graded relevance (DESIGN.md, leaderboard), per domain and overall, with bootstrap CIs.

Gain 2^rel − 1 ("exponential", the paper's) or rel ("linear"); discount 1/log2(rank + 1); the
ideal DCG is over the same query's candidates.

Ties in the retriever's scores (``ties``):
- ``"average"`` (default): the expected DCG over all orders of each group of tied scores
  (McSherry & Najork, ECIR 2008): every member of a tie group gets the group's mean gain at each of
  the ranks the group occupies. The result does not depend on the order candidates are listed in,
  so no candidate group (topic-only, summary-only, both) is favoured by its position.
- ``"stable"``: the candidate listed earlier ranks higher (a stable sort), deterministic but
  order-dependent.
- ``"numpy"``: the order ``numpy.argsort(-scores)`` gives (numpy's default, unstable sort), which
  is what the SABER-Math reference evaluation does: only for comparing with its figures.
ranx truncates fractional grades to integers, so this metric does not go through ranx.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

import numpy as np

from saber_assets.benchmark.data import best_rated


def gains(relevance: np.ndarray, gain: str) -> np.ndarray:
    """Each grade's gain: 2^rel − 1 (``exponential``) or rel (``linear``)."""
    if gain == "exponential":
        return np.power(2.0, relevance) - 1.0
    if gain == "linear":
        return relevance.astype(np.float64)
    raise ValueError(f"gain must be 'exponential' or 'linear', not {gain!r}")


def dcg_weights(scores, k: int = 10, ties: str = "average") -> np.ndarray:
    """Each candidate's weight in the DCG@k of a ranking by ``scores``: DCG = Σ weight · gain,
    linear in the gains (a tie group shares the discounts of the ranks it occupies), so one
    ranking scores many draws of the grades as one matrix product."""
    scores = np.asarray(scores, dtype=np.float64)
    if np.isnan(scores).any():
        raise ValueError("scores contain NaN")
    if ties not in ("average", "stable", "numpy"):
        raise ValueError(f"ties must be 'average', 'stable' or 'numpy', not {ties!r}")
    n = len(scores)
    disc = np.zeros(n)
    disc[: min(k, n)] = 1.0 / np.log2(np.arange(2, min(k, n) + 2))
    order = np.argsort(-scores) if ties == "numpy" else np.argsort(-scores, kind="stable")
    weights = np.zeros(n)
    if ties in ("stable", "numpy") or n == 0:
        weights[order] = disc
        return weights
    s = scores[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    sizes = np.diff(np.r_[starts, n])
    weights[order] = np.repeat(np.add.reduceat(disc, starts) / sizes, sizes)
    return weights


def ideal_dcg(gains: np.ndarray, k: int = 10) -> np.ndarray:
    """The DCG@k of the best ordering of ``gains`` (candidates along the first axis; a matrix
    gives one ideal per column)."""
    g = np.asarray(gains, dtype=np.float64)
    top = -np.sort(-g, axis=0)[:k]
    discounts = 1.0 / np.log2(np.arange(2, len(top) + 2))
    return np.tensordot(discounts, top, axes=(0, 0))


def ndcg_at_k(
    scores, relevance, k: int = 10, gain: str = "exponential", ties: str = "average"
) -> float:
    """nDCG@k of one query: ``scores`` and ``relevance`` are aligned over its candidates."""
    scores = np.asarray(scores, dtype=np.float64)
    relevance = np.asarray(relevance, dtype=np.float64)
    if scores.shape != relevance.shape:
        raise ValueError(f"{scores.shape[0]} scores for {relevance.shape[0]} relevance values")
    g = gains(relevance, gain)
    top = float(g.max()) if g.size else 0.0
    if top > 0:
        g = g / top  # nDCG is scale-free; tiny gains (denormals) would round a tie's share to 0
    dcg = float(dcg_weights(scores, k, ties) @ g)
    idcg = float(ideal_dcg(g, k))
    return dcg / idcg if idcg > 0 else 0.0


def bootstrap_means(values, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """The means of ``resamples`` seeded resamples of the queries (rows, with replacement). A
    matrix (queries × systems) is resampled by row: every system sees the same query sets, so
    the resamples compare systems (rank intervals); a vector gives one mean per resample."""
    v = np.asarray(values, dtype=np.float64)
    return v[resampled_rows(len(v), resamples, seed)].mean(axis=1)


def resampled_rows(n: int, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """The seeded bootstrap's query draws (resamples × n row indices): every interval over the
    queries resamples with these, so intervals computed apart see the same query sets."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def bootstrap_ci(
    values: Sequence[float], resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean, resampling queries with replacement (seeded)."""
    v = np.asarray(values, dtype=np.float64)
    if len(v) == 0:
        return (float("nan"), float("nan"))
    means = bootstrap_means(v, resamples, seed)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def summarize(
    per_query: Sequence[float],
    query_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    resamples: int = 1000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Overall = mean over queries; per domain = mean over queries whose domain list holds it."""
    v = np.asarray(per_query, dtype=np.float64)
    out = {"overall": _entry(v, resamples, seed)}
    for d in domains:
        mask = np.array([d in ds for ds in query_domains], dtype=bool)
        out[d] = _entry(v[mask], resamples, seed)
    return out


def _entry(v: np.ndarray, resamples: int, seed: int) -> dict[str, float]:
    lo, hi = bootstrap_ci(v, resamples, seed)
    return {
        "mean": float(v.mean()) if len(v) else float("nan"),
        "low": lo,
        "high": hi,
        "queries": int(len(v)),
    }


def condensed_ndcg(
    ranked_doc_rows: Sequence[int],
    candidates: Sequence[int],
    relevance: Sequence[float],
    k: int = 10,
    gain: str = "exponential",
) -> float:
    """nDCG'@k (ARQMath's prime metric): unrated documents are removed from the ranking first."""
    rel_of = dict(zip(candidates, relevance, strict=True))
    condensed = [d for d in ranked_doc_rows if d in rel_of]
    seen = set(condensed)
    # candidates the system never returned rank after the returned ones, in listed order
    rest = [d for d in candidates if d not in seen]
    order = condensed + rest
    scores = -np.arange(len(order), dtype=np.float64)
    return ndcg_at_k(scores, [rel_of[d] for d in order], k, gain)


def recall_of_top(
    ranked_doc_rows: Sequence[int],
    candidates: Sequence[int],
    relevance: Sequence[float],
    top: int = 5,
    depth: int = 100,
) -> float:
    """Share of the query's ``top`` highest-rated candidates among the first ``depth`` retrieved."""
    best = best_rated(candidates, relevance, top)
    retrieved = set(list(ranked_doc_rows)[:depth])
    return sum(d in retrieved for d in best) / len(best) if best else 0.0


# ---- the full-corpus track's top k and its holes (leaderboard/holes.py fills them)


def top_rows(all_scores: np.ndarray, k: int, floor: float | None = None) -> np.ndarray:
    """The rows of the ``k`` best-scored documents, by (score descending, row ascending), as a
    stable sort of the whole corpus would give them, without sorting it. ``floor``: a score
    the k-th best is known to reach (a deeper cut's, already found), sparing the partition."""
    n = len(all_scores)
    if n == 0 or k <= 0:
        return np.zeros(0, dtype=np.int64)
    if n > k:
        t = np.partition(all_scores, n - k)[n - k] if floor is None else floor  # the k-th best
        rows = np.flatnonzero(all_scores >= t)  # every document that may be in the top k
    else:
        rows = np.arange(n)
    return rows[np.lexsort((rows, -all_scores[rows]))][:k]


def top_ids(
    all_scores: np.ndarray, doc_ids: Sequence[str], k: int, floor: float | None = None
) -> list[str]:
    """The ids of ``top_rows``."""
    return [doc_ids[r] for r in top_rows(all_scores, k, floor).tolist()]


def dcg_gain(grade: float) -> float:
    return 2.0**grade - 1.0


def graded_ndcg(top: Sequence[str], grades: Mapping[str, float], k: int) -> float:
    """nDCG@k of a ranking's first ``k`` documents (``top``) against the query's ``grades``
    (document id -> grade): a document without a grade gains 0; the ideal ranks every graded
    document. 0 where no document has a positive grade."""
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    gains = [dcg_gain(grades.get(d, 0.0)) for d in list(top)[:k]]
    # the gain grows with the grade: the k best grades make the ideal (no sort of them all)
    ideal = [dcg_gain(g) for g in heapq.nlargest(k, grades.values())]
    best = float(np.dot(ideal, discounts[: len(ideal)]))
    return float(np.dot(gains, discounts[: len(gains)])) / best if best > 0 else 0.0


def judged_at(top: Sequence[str], graded: set[str] | Mapping[str, float], k: int) -> float:
    """The share of the first ``k`` of ``top`` that carry a grade (of ``k``: a short list's
    missing places are not judged)."""
    return sum(d in graded for d in list(top)[:k]) / k
