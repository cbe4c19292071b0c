"""Relevance thresholds, exactly, at the storage resolution (1/255), from the stored pairs.

A pair is topic-relevant if its quantised topic value q_t > τ_t, summary-relevant if q_s > τ_s
(thresholds in quanta, value = q / 255). For query i:
    topic-only   = #{j : q_t > τ_t, q_s <= τ_s}
    summary-only = #{j : q_s > τ_s, q_t <= τ_t}
    both         = #{j : q_t > τ_t, q_s > τ_s}
A query is viable when each group has >= K members.

Counts are exact for every τ_t >= floor_t − 1 and τ_s >= floor_s − 1 (quanta): a pair that is not
stored has q_t < floor_t and q_s < floor_s, so it is in no group there. Below that they are not
derivable, and are not considered.

Rule (the paper's appendix, as read here): per domain, among the (τ_t, τ_s) at which at least Q of
the domain's queries are viable, take the strictest; the final thresholds are the minimum over
domains of each coordinate. "Strictest" in two dimensions: the largest τ_t + τ_s in quanta (one
quantum of either signal is the same step of 1/255), and among equal sums the larger τ_t (the
topic signal, the ontology's structural evidence, is the one the paper leads with). Viability is
not monotone in either threshold (raising τ_s moves pairs from "both" to "topic-only"), so the
minimum over domains does not promise Q viable queries everywhere: the exact count of viable
queries per domain at the final thresholds is reported next to them.

How: for one row and one τ_t the viable τ_s form an interval [lo, hi] — topic-only needs
τ_s >= (K-th smallest q_s among q_t > τ_t), both needs τ_s < (K-th largest q_s among q_t > τ_t),
summary-only needs τ_s < (K-th largest q_s among q_t <= τ_t). Sweeping τ_t downwards moves pairs
from the second set to the first, and the three order statistics move monotonically, so a row
costs O(pairs + 256) and every interval lands in a difference array per domain (Numba).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numba as nb
import numpy as np

from saber_assets.signals.kernels import pair_values, quantize

QMAX = 255  # quanta 0..255; thresholds 0..254 (q > 255 is impossible)
EMPTY_LO, EMPTY_HI = QMAX, 0  # an empty interval of viable τ_s (lo > hi)


class RowBlock(NamedTuple):
    """Rows [start, start + len(indptr) - 1): each row's pairs in both directions, sorted by q_t
    descending, as CSR (indptr local to the block)."""

    start: int
    indptr: np.ndarray
    tq: np.ndarray
    sq: np.ndarray


def row_pairs(
    n: int, i: np.ndarray, j: np.ndarray, tq: np.ndarray, sq: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Both directions of every stored pair, grouped by row and sorted by q_t descending (ties
    in the order of ``concatenate([i, j])``, as a stable sort would): (indptr, q_t, q_s).

    Counting sorts in Numba: 4 bytes per pair beyond the inputs (a lexsort of int64 copies
    needed ~100), which is what lets the thresholds and candidates hold 20M+ stored pairs."""
    return _row_pairs(n, i, j, np.asarray(tq, np.uint8), np.asarray(sq, np.uint8))


@nb.njit(cache=True, nogil=True)
def _row_pairs(n, i, j, tq, sq):  # pragma: no cover - compiled
    m = len(i)
    indptr = np.zeros(n + 1, dtype=np.int64)
    for p in range(m):
        indptr[i[p] + 1] += 1
        indptr[j[p] + 1] += 1
    for r in range(n):
        indptr[r + 1] += indptr[r]
    t_out = np.empty(2 * m, dtype=np.uint8)
    s_out = np.empty(2 * m, dtype=np.uint8)
    cur = indptr[:-1].copy()
    for side in range(2):  # every i-direction first, then every j-direction
        rows = i if side == 0 else j
        for p in range(m):
            r = rows[p]
            t_out[cur[r]] = tq[p]
            s_out[cur[r]] = sq[p]
            cur[r] += 1
    _sort_rows(indptr, t_out, s_out)
    return indptr, t_out, s_out


def sort_rows_by_topic(indptr: np.ndarray, tq: np.ndarray, sq: np.ndarray) -> None:
    """In place: each CSR row's (q_t, q_s) stably sorted by q_t descending."""
    _sort_rows(indptr, tq, sq)


@nb.njit(cache=True, nogil=True)
def _sort_rows(indptr, t_out, s_out):  # pragma: no cover - compiled
    n = len(indptr) - 1
    longest = 0
    for r in range(n):
        longest = max(longest, indptr[r + 1] - indptr[r])
    tmp_t = np.empty(longest, dtype=np.uint8)
    tmp_s = np.empty(longest, dtype=np.uint8)
    start = np.empty(QMAX + 2, dtype=np.int64)
    for r in range(n):  # stable counting sort of each row by q_t, descending
        a, b = indptr[r], indptr[r + 1]
        if b - a < 2:
            continue
        start[:] = 0
        for p in range(a, b):
            start[QMAX + 1 - int(t_out[p])] += 1  # int(): no uint8 wrap with the JIT off
        for v in range(QMAX + 1):
            start[v + 1] += start[v]
        for p in range(a, b):
            k = QMAX - t_out[p]
            tmp_t[start[k]] = t_out[p]
            tmp_s[start[k]] = s_out[p]
            start[k] += 1
        t_out[a:b] = tmp_t[: b - a]
        s_out[a:b] = tmp_s[: b - a]


@nb.njit(cache=True, nogil=True)
def viable_intervals(
    tq, sq, a, b, k, t_min, s_min, cnt_hi, cnt_lo, lo_out, hi_out
):  # pragma: no cover
    """One row's viable τ_s interval for every τ_t >= t_min (module docstring): its pairs
    [a, b) of (tq, sq), sorted by q_t descending; lo_out[τ_t] <= hi_out[τ_t] where some τ_s
    leaves the row viable, else (EMPTY_LO, EMPTY_HI). ``cnt_hi``/``cnt_lo``: QMAX + 1 scratch."""
    lo_out[:] = EMPTY_LO
    hi_out[:] = EMPTY_HI
    cnt_hi[:] = 0
    cnt_lo[:] = 0
    n_hi = 0
    for p in range(a, b):
        cnt_lo[sq[p]] += 1
    # K-th largest q_s among the lo set (q_t <= τ_t): a3, with c3 = #lo >= a3
    a3 = 0
    c3 = b - a
    while c3 - cnt_lo[a3] >= k:
        c3 -= cnt_lo[a3]
        a3 += 1
    a1 = QMAX  # K-th smallest q_s among the hi set, c1 = #hi <= a1
    c1 = 0
    a2 = 0  # K-th largest q_s among the hi set, c2 = #hi >= a2
    c2 = 0
    started = False
    p = a
    for tt in range(QMAX - 1, t_min - 1, -1):
        while p < b and tq[p] > tt:  # pairs with q_t = tt + 1 join the hi set
            v = sq[p]
            p += 1
            cnt_hi[v] += 1
            n_hi += 1
            cnt_lo[v] -= 1
            if v >= a3:
                c3 -= 1
            while c3 < k and a3 > 0:
                a3 -= 1
                c3 += cnt_lo[a3]
            if started:
                if v <= a1:
                    c1 += 1
                if v >= a2:
                    c2 += 1
            elif n_hi >= k:
                started = True
                a1, c1, a2, c2 = QMAX, n_hi, 0, n_hi
            if started:
                while c1 - cnt_hi[a1] >= k:
                    c1 -= cnt_hi[a1]
                    a1 -= 1
                while c2 - cnt_hi[a2] >= k:
                    c2 -= cnt_hi[a2]
                    a2 += 1
        if c3 < k:
            break  # the lo set only shrinks: summary-only stays short for smaller τ_t
        if n_hi < 2 * k:
            continue
        lo = max(a1, s_min)
        hi = min(a2 - 1, a3 - 1, QMAX - 1)
        if lo <= hi:
            lo_out[tt] = lo
            hi_out[tt] = hi


@nb.njit(cache=True, nogil=True)
def _viable_diff(indptr, tq, sq, dom_ptr, dom_idx, n_domains, k, t_min, s_min):  # pragma: no cover
    diff = np.zeros((n_domains, QMAX, QMAX + 1), dtype=np.int32)
    cnt_hi = np.zeros(QMAX + 1, dtype=np.int64)
    cnt_lo = np.zeros(QMAX + 1, dtype=np.int64)
    lo = np.empty(QMAX, dtype=np.uint8)
    hi = np.empty(QMAX, dtype=np.uint8)
    n = len(indptr) - 1
    for r in range(n):
        d0, d1 = dom_ptr[r], dom_ptr[r + 1]
        a, b = indptr[r], indptr[r + 1]
        if d0 == d1 or b - a < 3 * k:
            continue
        viable_intervals(tq, sq, a, b, k, t_min, s_min, cnt_hi, cnt_lo, lo, hi)
        for tt in range(t_min, QMAX):
            if lo[tt] <= hi[tt]:
                for q in range(d0, d1):
                    diff[dom_idx[q], tt, lo[tt]] += 1
                    diff[dom_idx[q], tt, np.int64(hi[tt]) + 1] -= 1
    return diff


def domain_csr(rows: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, domain indices) of rows given as lists of domain indices: the kernels'
    form of each row's domains."""
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=ptr[1:])
    return ptr, np.array([x for r in rows for x in r], dtype=np.int64)


def domain_rows(
    row_domains: Sequence[Sequence[str]], domains: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, domain indices) of each row's domains among ``domains``."""
    return domain_csr(domain_index(row_domains, domains)[1])


def viable_counts(
    indptr: np.ndarray,
    tq: np.ndarray,
    sq: np.ndarray,
    row_domains: Sequence[Sequence[int]],
    n_domains: int,
    k: int,
    t_min: int,
    s_min: int,
) -> np.ndarray:
    """counts[d, τ_t, τ_s] = queries of domain d viable at (τ_t, τ_s); exact for τ_t >= t_min,
    τ_s >= s_min (entries outside are 0)."""
    if len(row_domains) != len(indptr) - 1:  # the kernel would read past the domain offsets
        raise ValueError(f"{len(row_domains)} rows of domains for {len(indptr) - 1} rows of pairs")
    dom_ptr, dom_idx = domain_csr(row_domains)
    diff = _viable_diff(indptr, tq, sq, dom_ptr, dom_idx, n_domains, k, t_min, s_min)
    return np.cumsum(diff, axis=2)[:, :, :QMAX]


THRESHOLD_RULES = ("exact_gt", "float16_ge")


@dataclass(frozen=True)
class Cut:
    """A threshold given as a number: relevant iff the exact value > ``tau`` (the paper's
    ``sim > τ``). The stored byte q decides where it can; where it lies within one quantum of τ
    (|q − 255τ| <= 1: rounding and the kernel's float32 sums) the exact value, recomputed, does.
    So 7/33 = 0.2121 is above 0.211 and 0.2105 is not, though both store the byte 54.

    ``rule="float16_ge"`` decides as the reference code does: float16(sim) >= float16(τ). Its
    rounding (under 0.0005 in [0, 1]) stays inside the undecided quantum, so the byte still
    decides everything else."""

    tau: float
    rule: str = "exact_gt"

    def __post_init__(self) -> None:
        if self.rule not in THRESHOLD_RULES:
            raise ValueError(f"threshold rule {self.rule!r}: one of {', '.join(THRESHOLD_RULES)}")

    def relevant(self, values: np.ndarray) -> np.ndarray:
        """The rule on exact values."""
        values = np.asarray(values)
        if self.rule == "float16_ge":
            return values.astype(np.float16) >= np.float16(self.tau)
        return values > self.tau

    def key(self) -> float | list:
        """What a cache key holds of it (the default rule: the number alone, as before)."""
        return self.tau if self.rule == "exact_gt" else [self.tau, self.rule]

    @property
    def q(self) -> int:
        """The threshold's own byte: a value above τ stores at least this byte."""
        return int(quantize(self.tau))

    @property
    def lowest(self) -> int:
        """The smallest byte this cut counts as relevant or recomputes (one below ``q``): what
        the shards store for it, a quantum of margin under the lowest relevant byte."""
        return max(0, math.ceil(self.tau * QMAX - 1))

    def decide(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(surely above, undecided) per byte."""
        x = self.tau * QMAX
        q = np.asarray(q, dtype=np.int64)
        above = q > x + 1
        return above, ~above & (q >= x - 1)


Threshold = int | Cut  # int: in quanta (relevant iff q > it), exact at the storage resolution


def lowest_relevant_byte(thr: Threshold) -> int:
    """The smallest stored byte a relevant pair can have: q > t means t + 1; sim > τ rounds to
    τ's own byte or more."""
    return thr.q if isinstance(thr, Cut) else thr + 1


def check_floors(t_thr: Threshold, s_thr: Threshold, floors: tuple[int, int]) -> None:
    """Every pair that can be relevant must be stored: a threshold whose relevant pairs reach
    below a storage floor is an error (they would be missed, silently)."""
    low = lowest_relevant_byte(t_thr), lowest_relevant_byte(s_thr)
    if low[0] < floors[0] or low[1] < floors[1]:
        raise ValueError(
            f"thresholds ({t_thr}, {s_thr}) let pairs from bytes {low} be relevant, below the "
            f"storage floors {floors}: lower the floors and recompute the shards"
        )


class ExactSignals:
    """Unquantised signals of given pairs from the kernel inputs, counted: ``recomputed`` pairs
    in ``seconds``."""

    def __init__(self, t_ptr, t_idx, lin, s_ptr, s_idx) -> None:
        self.arrays = (t_ptr, t_idx, lin, s_ptr, s_idx)
        self.recomputed = 0
        self.seconds = 0.0

    @classmethod
    def of(cls, inputs) -> ExactSignals:
        """From ``prepare.SignalInputs``."""
        return cls(inputs.t_ptr, inputs.t_idx, inputs.lin, inputs.s_ptr, inputs.s_idx)

    def __call__(self, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t0 = time.perf_counter()
        out = pair_values(*self.arrays, i, j)
        self.recomputed += len(i)
        self.seconds += time.perf_counter() - t0
        return out


@dataclass(frozen=True)
class Relevance:
    """Both thresholds, and the exact signals a ``Cut`` needs for the bytes it cannot decide."""

    topic: Threshold
    summary: Threshold
    exact: ExactSignals | None = None

    def masks(self, i, j, tq, sq) -> tuple[np.ndarray, np.ndarray]:
        """(topic-relevant, summary-relevant) per stored pair (i, j, q_t, q_s)."""
        out = []
        for k, (q, thr) in enumerate(((tq, self.topic), (sq, self.summary))):
            if not isinstance(thr, Cut):
                out.append(np.asarray(q) > thr)
                continue
            above, unsure = thr.decide(q)
            if unsure.any():
                if self.exact is None:
                    raise ValueError("a threshold given as a number needs the exact pair signals")
                above[unsure] = thr.relevant(self.exact(i[unsure], j[unsure])[k])
            out.append(above)
        return out[0], out[1]


def group_counts(
    n: int,
    i: np.ndarray,
    j: np.ndarray,
    tq: np.ndarray,
    sq: np.ndarray,
    t_thr: Threshold,
    s_thr: Threshold,
    exact: ExactSignals | None = None,
) -> np.ndarray:
    """(n, 3) counts per row of its topic-only, summary-only and both pairs (both directions)
    among the stored pairs given, at thresholds (τ_t, τ_s) in quanta or exact (``Cut``):
    bincounts over boolean masks, so any cut of the pairs into chunks adds up to the whole."""
    t_rel, s_rel = Relevance(t_thr, s_thr, exact).masks(i, j, tq, sq)
    out = np.zeros((n, 3), dtype=np.int64)
    for g, mask in enumerate((t_rel & ~s_rel, s_rel & ~t_rel, t_rel & s_rel)):
        out[:, g] = np.bincount(i[mask], minlength=n) + np.bincount(j[mask], minlength=n)
    return out


@dataclass
class ThresholdChoice:
    topic_q: int  # threshold in quanta: relevant iff q > topic_q
    summary_q: int
    # domain -> (topic_q, summary_q, viable queries there) or None (no feasible point)
    per_domain: dict[str, tuple[int, int, int] | None]
    # domain -> viable queries at the final thresholds (exact)
    viable_at_final: dict[str, int]

    @property
    def topic(self) -> float:
        return self.topic_q / QMAX

    @property
    def summary(self) -> float:
        return self.summary_q / QMAX


def strictest(viable: np.ndarray, q_min: int) -> tuple[int, int] | None:
    """The strictest (τ_t, τ_s) with viable >= q_min: largest τ_t + τ_s, then larger τ_t."""
    feasible = np.argwhere(viable >= q_min)
    if len(feasible) == 0:
        return None
    sums = feasible.sum(axis=1)
    best = feasible[sums == sums.max()]
    t, s = best[np.argmax(best[:, 0])]
    return int(t), int(s)


def in_memory_blocks(
    n: int, pairs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
) -> list[RowBlock]:
    """Every row of (i < j, q_t, q_s) as one block (what fits in memory; see ``StoredPairs``)."""
    return [RowBlock(0, *row_pairs(n, *pairs))]


def domain_index(
    row_domains: Sequence[Sequence[str]], domains: Sequence[str]
) -> tuple[dict[str, int], list[list[int]]]:
    """({domain: its index}, each row's domain indices among ``domains``)."""
    index = {d: x for x, d in enumerate(domains)}
    return index, [[index[d] for d in ds if d in index] for ds in row_domains]


def derive_thresholds(
    blocks: Iterable[RowBlock],
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    q_min: int,
    k: int,
    floor_topic_q: int,
    floor_summary_q: int,
) -> ThresholdChoice:
    """Per domain the strictest thresholds with >= q_min viable queries; final = minimum.
    The viability counts add up over row blocks, so the blocks may cover the rows in any cut."""
    index, rows = domain_index(row_domains, domains)
    t_min, s_min = max(floor_topic_q - 1, 0), max(floor_summary_q - 1, 0)
    counts = np.zeros((len(domains), QMAX, QMAX), dtype=np.int64)
    for b in blocks:
        block_rows = rows[b.start : b.start + len(b.indptr) - 1]
        counts += viable_counts(b.indptr, b.tq, b.sq, block_rows, len(domains), k, t_min, s_min)
        del b  # released before the next block is gathered: one block in memory, not two
    return pick_thresholds(counts, index, q_min, k)


def pick_thresholds(
    counts: np.ndarray, index: dict[str, int], q_min: int, k: int
) -> ThresholdChoice:
    """The rule on viability counts[d, τ_t, τ_s] (domain d = ``index[name]``): per domain the
    strictest point with >= q_min viable queries (``k`` candidates a group: named in the error);
    final = the minimum of each coordinate."""
    per_domain: dict[str, tuple[int, int, int] | None] = {}
    for d, x in index.items():
        point = strictest(counts[x], q_min)
        per_domain[d] = None if point is None else (*point, int(counts[x][point]))
    chosen = [v for v in per_domain.values() if v is not None]
    if not chosen:
        raise ValueError(
            f"no domain has {q_min} queries with {k} candidates in each group at any threshold above the floors: "
            "lower candidates.queries_per_domain / candidates_per_group, or lower the storage floors"
        )
    t, s = min(c[0] for c in chosen), min(c[1] for c in chosen)
    return ThresholdChoice(t, s, per_domain, {d: int(counts[x][t, s]) for d, x in index.items()})


def viable_per_domain(
    chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    k: int,
    t_thr: Threshold,
    s_thr: Threshold,
    exact: ExactSignals | None = None,
) -> dict[str, int]:
    """Viable queries per domain at given thresholds (quanta), counted directly from the stored
    pairs (i, j, q_t, q_s) in any cut: one pass, nothing gathered or sorted."""
    counts = chunk_group_counts(chunks, len(row_domains), t_thr, s_thr, exact)
    return viable_by_domain(counts.min(axis=1) >= k, row_domains, domains)


def chunk_group_counts(
    chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    n: int,
    t_thr: Threshold,
    s_thr: Threshold,
    exact: ExactSignals | None = None,
) -> np.ndarray:
    """``group_counts`` of every chunk of pairs, added up: (n, 3) per row."""
    counts = np.zeros((n, 3), dtype=np.int64)
    for i, j, tq, sq in chunks:
        counts += group_counts(n, i, j, tq, sq, t_thr, s_thr, exact)
    return counts


def viable_by_domain(
    viable: np.ndarray, row_domains: Sequence[Sequence[str]], domains: Sequence[str]
) -> dict[str, int]:
    """How many viable rows each domain has (a row counts in each of its domains)."""
    _, rows = domain_index(row_domains, domains)
    out = dict.fromkeys(domains, 0)
    for r in np.flatnonzero(viable):
        for x in rows[r]:
            out[domains[x]] += 1
    return out


# ------------------------------------------------------------------------------- percentiles


class PercentileError(ValueError):
    """The percentile lies where the stored pairs cannot tell it (below a storage floor)."""


def percentile_thresholds(
    chunks,
    n: int,
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    p: float,
    floors: tuple[int, int],
    exact: ExactSignals,
) -> dict[str | None, tuple[float, float]]:
    """The ``p``-th percentile (inverted CDF: the smallest value v with a share >= p/100 of the
    pairs at or below it) of each signal over all n(n−1)/2 pairs (key None) and over each
    domain's pairs (the ordered pairs whose query is in the domain: n_D·(n − 1)), exactly.

    Two passes over the stored pairs (``chunks()`` each time): 256-bin histograms of the bytes,
    which locate each percentile's quantum; then the exact values of the pairs in that quantum,
    whose order statistic it is. Every pair not stored lies below the floors, so a percentile
    the stored pairs cannot reach is an error naming the floor to lower."""
    if not 0 < p < 100:
        raise ValueError(f"the percentile must lie in (0, 100), not {p}")
    groups: list[str | None] = [None, *domains]
    index = {d: g for g, d in enumerate(groups)}
    member = np.zeros((len(groups), n), dtype=np.bool_)
    member[0] = True
    for r, ds in enumerate(row_domains):
        for d in ds:
            if d in index:
                member[index[d], r] = True
    totals = [n * (n - 1) / 2] + [float(member[g].sum()) * (n - 1) for g in range(1, len(groups))]
    hist = np.zeros((len(groups), 2, QMAX + 1), dtype=np.int64)

    def weights(g: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        if g == 0:
            return np.ones(len(i), dtype=np.int64)
        return member[g, i].astype(np.int64) + member[g, j]

    for i, j, tq, sq in chunks():
        for g in range(len(groups)):
            w = weights(g, i, j)
            for s_, q in enumerate((tq, sq)):
                hist[g, s_] += np.bincount(q, weights=w, minlength=QMAX + 1).astype(np.int64)
    # per (group, signal): the quantum holding the percentile and its rank inside it
    target: dict[tuple[int, int], tuple[int, int]] = {}
    names = ("topic", "summary")
    for g in range(len(groups)):
        for s_ in range(2):
            floor = floors[s_]
            known = hist[g, s_, floor:]
            below = totals[g] - known.sum()  # every pair under the floor, stored or not
            rank = int(np.ceil(p / 100 * totals[g]))
            if totals[g] == 0:
                continue
            if rank <= below:
                where = "overall" if groups[g] is None else f"in {groups[g]!r}"
                raise PercentileError(
                    f"the {p:g}th percentile of the {names[s_]} signal {where} lies below the "
                    f"storage floor ({floor}/255): lower signals.floor_{names[s_]} to store it"
                )
            cum = below + np.cumsum(known)
            b = int(np.searchsorted(cum, rank, side="left"))
            before = below + (known[:b].sum() if b else 0)
            target[(g, s_)] = (floor + b, int(rank - before))
    picked: dict[tuple[int, int], list[np.ndarray]] = {key: [] for key in target}
    wanted = [[b for (_, s_), (b, _) in target.items() if s_ == x] for x in range(2)]
    for i, j, tq, sq in chunks():
        # each pair in any percentile's quantum recomputed once, whichever groups want it
        hit = np.flatnonzero(np.isin(tq, wanted[0]) | np.isin(sq, wanted[1]))
        if not len(hit):
            continue
        i, j, qs = i[hit], j[hit], (tq[hit], sq[hit])
        vals = exact(i, j)
        for (g, s_), (b, _) in target.items():
            sel = qs[s_] == b
            if sel.any():
                picked[(g, s_)].append(np.repeat(vals[s_][sel], weights(g, i[sel], j[sel])))
    out: dict[str | None, tuple[float, float]] = {}
    for g, d in enumerate(groups):
        if totals[g] == 0:
            continue
        pair = []
        for s_ in range(2):
            vals = np.sort(np.concatenate(picked[(g, s_)]))
            pair.append(float(vals[target[(g, s_)][1] - 1]))
        out[d] = (pair[0], pair[1])
    return out


def percentile_taus(by: dict[str | None, tuple[float, float]], scope: str) -> tuple[float, float]:
    """The thresholds of ``percentile_thresholds``' answer: overall (``scope`` "global"), or
    each signal's smallest over the domains ("domain")."""
    if scope == "global":
        return by[None]
    per_domain = [v for d, v in by.items() if d is not None]
    return min(v[0] for v in per_domain), min(v[1] for v in per_domain)
