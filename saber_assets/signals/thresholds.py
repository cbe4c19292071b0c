"""Relevance thresholds from per-row 2-D histograms of the stored pairs (both directions).

A pair is topic-relevant if its quantised topic value q_t > τ_t, summary-relevant if q_s > τ_s
(thresholds in quanta, value = q / 255). For query i:
    topic-only   = #{j : q_t > τ_t, q_s <= τ_s}
    summary-only = #{j : q_s > τ_s, q_t <= τ_t}
    both         = #{j : q_t > τ_t, q_s > τ_s}
A query is viable when each group has >= K members. Histogram bin b holds q with
b = q·B // 256, so the threshold grid is τ = (first quantum of bin b) − 1, i.e. "q in bin >= b".

Derivation (paper appendix, as read here): per domain, among the grid thresholds at which at least Q
of the domain's queries are viable, take the strictest (largest τ_t + τ_s, then τ_t); the final
thresholds are the minimum over domains, so every domain keeps at least as many viable queries.
Only grid points above the storage floors are considered: below them not every pair is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def bin_edges(bins: int) -> np.ndarray:
    """First quantum of each bin (q // (256 / bins))."""
    return np.array([-(-b * 256 // bins) for b in range(bins)], dtype=np.int64)


def row_histograms(
    n: int, i: np.ndarray, j: np.ndarray, tq: np.ndarray, sq: np.ndarray, bins: int
) -> np.ndarray:
    """hist[row, topic bin, summary bin] over the stored pairs, counted for both endpoints."""
    hist = np.zeros((n, bins, bins), dtype=np.uint32)
    bt = np.minimum(tq.astype(np.int64) * bins // 256, bins - 1)
    bs = np.minimum(sq.astype(np.int64) * bins // 256, bins - 1)
    np.add.at(hist, (i, bt, bs), 1)
    np.add.at(hist, (j, bt, bs), 1)
    return hist


def group_counts(hist: np.ndarray, kt: int, ks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(topic-only, summary-only, both) per row for thresholds at bins kt, ks."""
    both = hist[:, kt:, ks:].sum(axis=(1, 2))
    topic_only = hist[:, kt:, :ks].sum(axis=(1, 2))
    summary_only = hist[:, :kt, ks:].sum(axis=(1, 2))
    return topic_only, summary_only, both


def viable_counts(hist: np.ndarray, k: int, min_bin_t: int, min_bin_s: int) -> np.ndarray:
    """viable[kt, ks] = number of rows with >= k in each group (grid bins below the floors: -1)."""
    bins = hist.shape[1]
    # suffix sums make every (kt, ks) an O(1) lookup per row
    suf = hist[:, ::-1, ::-1].cumsum(1).cumsum(2)[:, ::-1, ::-1].astype(np.int64)
    suf = np.concatenate([suf, np.zeros((suf.shape[0], 1, bins), np.int64)], axis=1)
    suf = np.concatenate([suf, np.zeros((suf.shape[0], bins + 1, 1), np.int64)], axis=2)
    out = np.full((bins, bins), -1, dtype=np.int64)
    for kt in range(min_bin_t, bins):
        for ks in range(min_bin_s, bins):
            both = suf[:, kt, ks]
            topic_only = suf[:, kt, 0] - both
            summary_only = suf[:, 0, ks] - both
            out[kt, ks] = int(np.sum((topic_only >= k) & (summary_only >= k) & (both >= k)))
    return out


@dataclass
class ThresholdChoice:
    topic_q: int  # threshold in quanta: relevant iff q > topic_q
    summary_q: int
    per_domain: dict[
        str, tuple[int, int, int] | None
    ]  # domain -> (topic_q, summary_q, viable queries) or None

    @property
    def topic(self) -> float:
        return self.topic_q / 255

    @property
    def summary(self) -> float:
        return self.summary_q / 255


def first_bin_above(floor_q: int, bins: int) -> int:
    """Smallest bin whose every quantum is >= floor_q (so all its pairs are stored)."""
    edges = bin_edges(bins)
    ok = np.nonzero(edges >= floor_q)[0]
    return int(ok[0]) if len(ok) else bins


def derive_thresholds(
    hist: np.ndarray,
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    q_min: int,
    k: int,
    floor_topic_q: int,
    floor_summary_q: int,
) -> ThresholdChoice:
    bins = hist.shape[1]
    edges = bin_edges(bins)
    min_t, min_s = first_bin_above(floor_topic_q, bins), first_bin_above(floor_summary_q, bins)
    per_domain: dict[str, tuple[int, int, int] | None] = {}
    for d in domains:
        rows = np.array([i for i, ds in enumerate(row_domains) if d in ds], dtype=np.int64)
        if len(rows) == 0:
            per_domain[d] = None
            continue
        viable = viable_counts(hist[rows], k, min_t, min_s)
        feasible = np.argwhere(viable >= q_min)
        if len(feasible) == 0:
            per_domain[d] = None
            continue
        kt, ks = max(feasible.tolist(), key=lambda x: (x[0] + x[1], x[0]))
        per_domain[d] = (int(edges[kt] - 1), int(edges[ks] - 1), int(viable[kt, ks]))
    chosen = [v for v in per_domain.values() if v is not None]
    if not chosen:
        raise ValueError(
            f"no domain has {q_min} queries with {k} candidates in each group at any threshold above the floors: "
            "lower candidates.queries_per_domain / candidates_per_group, or lower the storage floors"
        )
    return ThresholdChoice(min(c[0] for c in chosen), min(c[1] for c in chosen), per_domain)
