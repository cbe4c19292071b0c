"""Storage floors from a first, storage-free pass: store only the pairs a threshold can select.

The relevance thresholds are chosen from the pairs, after they are stored; so the shards used to
store everything above fixed floors (topic 0.5, summary 0.2), far below the thresholds a
benchmark ends up with (the paper's 0.858 / 0.211), and most stored pairs were never selected.
Here the thresholds are bounded first, from every row's coarse 2-D histogram of its pairs in
both directions (``kernels.row_histograms``: no pair kept), and the shards then store only the
pairs at or above the bounds (a pair that is not stored has q_t < floor_t and q_s < floor_s, so
every threshold at or above floor − 1 is decided exactly on the stored pairs).

- Given thresholds (``thresholds.Cut``): no pass; the floor is the lowest byte the exact comparison may
  have to recompute (``Cut.lowest``).
- Viability (``thresholds.derive_thresholds``): per cell of the bins grid and per row, upper and
  lower bounds of the three group counts (a bin straddling a threshold counts in the upper bound
  only); per domain, V_up / V_lo = the rows whose bounds all reach K. A cell whose every point is
  surely feasible (V_lo >= Q) bounds the domain's strictest sum from below; the strictest point
  lies in a cell that may be feasible (V_up >= Q) with a corner sum at least that high. The
  floors are the lowest such cell corners over all domains (never below the configured floors,
  which bound the search as before): the derivation on the stored pairs is then the same as on
  every pair above the configured floors.
- Percentile: the coarse marginals of every group (all pairs, each domain) place each
  percentile in a bin exactly; the floor is that bin's first byte − 2 (the exact value's byte
  may sit one below its bin, and ``Cut`` decides one more below that).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from saber_assets.config import CandidateConfig
from saber_assets.signals.thresholds import QMAX, Cut, domain_rows

Q_BYTES = QMAX + 1


def bin_edges(n_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """(first byte, last byte) of every bin of ``q * n_bins // 256`` (the kernels' binning)."""
    q = np.arange(Q_BYTES)
    of = q * n_bins // Q_BYTES
    lo = np.array([q[of == b].min() for b in range(n_bins)])
    hi = np.array([q[of == b].max() for b in range(n_bins)])
    return lo, hi


@dataclass(frozen=True)
class StorageFloors:
    """Pairs with q_t >= topic or q_s >= summary are stored (bytes)."""

    topic: int
    summary: int
    source: str  # "config" (given thresholds), "viability", "percentile"
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"topic": self.topic, "summary": self.summary, "source": self.source, **self.detail}


def given_floors(topic_tau: float, summary_tau: float) -> StorageFloors:
    """Thresholds in config need no first pass: what their exact comparison may read."""
    return StorageFloors(Cut(topic_tau).lowest, Cut(summary_tau).lowest, "config")


@nb.njit(cache=True, nogil=True)
def _viability_bounds(hist, dom_ptr, dom_idx, n_domains, k):  # pragma: no cover - compiled
    n, g, _ = hist.shape
    up = np.zeros((n_domains, g, g), dtype=np.int64)
    lo = np.zeros((n_domains, g, g), dtype=np.int64)
    t_ge = np.zeros((g + 1, g), dtype=np.int64)  # [a, sb]: pairs with topic bin >= a
    t_le = np.zeros((g + 1, g), dtype=np.int64)  # [a + 1, sb]: pairs with topic bin <= a
    for r in range(n):
        d0, d1 = dom_ptr[r], dom_ptr[r + 1]
        if d0 == d1:
            continue
        t_ge[:] = 0
        t_le[:] = 0
        for a in range(g - 1, -1, -1):
            for sb in range(g):
                t_ge[a, sb] = t_ge[a + 1, sb] + hist[r, a, sb]
        for a in range(g):
            for sb in range(g):
                t_le[a + 1, sb] = t_le[a, sb] + hist[r, a, sb]
        for a in range(g):
            for c in range(g):
                # upper bounds: every bin that may lie on the relevant side of a threshold in
                # cell (a, c); lower bounds: the bins that surely do, for every point of it
                up_to = up_so = up_b = 0
                lo_to = lo_so = lo_b = 0
                for sb in range(g):
                    if sb <= c:
                        up_to += t_ge[a, sb]
                    if sb >= c:
                        up_so += t_le[a + 1, sb]
                        up_b += t_ge[a, sb]
                    if sb < c:
                        lo_to += t_ge[a + 1, sb]
                    if sb > c:
                        lo_so += t_le[a, sb]
                        lo_b += t_ge[a + 1, sb]
                if min(up_to, up_so, up_b) >= k:
                    for q in range(d0, d1):
                        up[dom_idx[q], a, c] += 1
                    if min(lo_to, lo_so, lo_b) >= k:
                        for q in range(d0, d1):
                            lo[dom_idx[q], a, c] += 1
    return up, lo


def viability_floors(
    hist: np.ndarray,
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    q_min: int,
    k: int,
    config_floors: tuple[int, int],
) -> StorageFloors:
    """Floors under which no domain's strictest viable point (``derive_thresholds`` over the
    thresholds at or above ``config_floors`` − 1) can lie, from the rows' histograms."""
    n_bins = hist.shape[1]
    lo_b, hi_b = bin_edges(n_bins)
    t0, s0 = (max(f - 1, 0) for f in config_floors)
    corner = np.minimum(hi_b, QMAX - 1)  # a bin's highest threshold the derivation tries
    inside = (corner[:, None] >= t0) & (corner[None, :] >= s0)
    corner_sum = corner[:, None] + corner[None, :]
    ptr, idx = domain_rows(row_domains, domains)
    v_up, v_lo = _viability_bounds(hist, ptr, idx, len(domains), k)
    per_domain: dict[str, list[int] | None] = {}
    for x, d in enumerate(domains):
        sure = inside & (v_lo[x] >= q_min)
        floor_sum = int(corner_sum[sure].max()) if sure.any() else -1
        maybe = np.argwhere(inside & (v_up[x] >= q_min) & (corner_sum >= floor_sum))
        if len(maybe) == 0:
            per_domain[d] = None  # no feasible point at any threshold: bounds nothing
            continue
        per_domain[d] = [
            int(max(lo_b[maybe[:, 0]].min(), t0)),
            int(max(lo_b[maybe[:, 1]].min(), s0)),
        ]
    found = [v for v in per_domain.values() if v is not None]
    bound = (min(v[0] for v in found), min(v[1] for v in found)) if found else (t0, s0)
    return StorageFloors(
        max(bound[0], config_floors[0]),
        max(bound[1], config_floors[1]),
        "viability",
        {"bins": n_bins, "per_domain": per_domain},
    )


def percentile_floors(
    hist: np.ndarray,
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    p: float,
    config_floors: tuple[int, int],
) -> StorageFloors:
    """Floors below every percentile ``thresholds.percentile_thresholds`` computes (all pairs
    and each domain's), each placed in its bin by the rows' histograms."""
    n = hist.shape[0]
    n_bins = hist.shape[1]
    lo_b, _ = bin_edges(n_bins)
    # per row: its pairs' coarse marginals, both directions (a domain's pairs are counted once
    # per end in the domain, as the percentile's weights do)
    marg = [hist.sum(axis=2, dtype=np.int64), hist.sum(axis=1, dtype=np.int64)]
    ptr, idx = domain_rows(row_domains, domains)
    groups: list[tuple[str, np.ndarray, float]] = [("all pairs", np.arange(n), 2.0)]
    rows_of = np.repeat(np.arange(n), np.diff(ptr))
    for x, d in enumerate(domains):
        groups.append((d, rows_of[idx == x], 1.0))
    placed: dict[str, list[int]] = {}
    lowest = [QMAX, QMAX]
    for name, rows, per_pair in groups:
        if not len(rows):
            continue
        bins = []
        for s_ in range(2):
            counts = marg[s_][rows].sum(axis=0) / per_pair
            rank = math.ceil(p / 100 * counts.sum())
            b = int(np.searchsorted(np.cumsum(counts), rank, side="left"))
            bins.append(b)
            lowest[s_] = min(lowest[s_], int(lo_b[min(b, n_bins - 1)]))
        placed[name] = bins
    floors = [max(lowest[s_] - 2, config_floors[s_], 0) for s_ in range(2)]
    return StorageFloors(
        floors[0], floors[1], "percentile", {"bins": n_bins, "percentile_bins": placed}
    )


def stored_share(hist: np.ndarray, floors: StorageFloors) -> float:
    """At most this share of all pairs is stored at the floors: the bins that reach them."""
    _, hi_b = bin_edges(hist.shape[1])
    reach = (hi_b[:, None] >= floors.topic) | (hi_b[None, :] >= floors.summary)
    total = hist.sum(dtype=np.int64)
    return float(hist.sum(axis=0, dtype=np.int64)[reach].sum() / total) if total else 0.0


def choose_floors(
    row_hist: Callable[[], np.ndarray],
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    cand: CandidateConfig,
    config_floors: tuple[int, int],
    bound: bool = True,
) -> tuple[StorageFloors, np.ndarray | None]:
    """The floors the candidates section needs, and the rows' histograms where it took them
    (``row_hist``: the first pass, called only when the thresholds are not given). Unbound:
    the configured floors, as stored before the first pass existed."""
    if not bound:
        return StorageFloors(*config_floors, "signals.floor_*"), None
    if cand.topic_threshold is not None and cand.summary_threshold is not None:
        return given_floors(cand.topic_threshold, cand.summary_threshold), None
    hist = row_hist()
    if cand.threshold_method == "percentile":
        return percentile_floors(hist, row_domains, domains, cand.percentile, config_floors), hist
    k, q = cand.candidates_per_group, cand.queries_per_domain
    return viability_floors(hist, row_domains, domains, q, k, config_floors), hist
