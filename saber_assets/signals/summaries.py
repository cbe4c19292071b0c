"""Per-row viability summaries: what the threshold derivation needs of every pair, in two bytes
per topic threshold and row, instead of the pairs themselves (DESIGN.md, pair signals).

For a row (a query) and a topic threshold τ_t, the summary thresholds τ_s that leave it viable
(K topic-only, K summary-only and K "both" candidates) form one interval (``thresholds``' module
docstring). A pass of the block kernel over *full* rows (every other problem, both directions)
keeps a block of rows' pairs at or above the storage floors in memory, and each row's sweep
(``viable_intervals``, the one the stored pairs' derivation runs) turns them into
``summary[row, τ_t] = (lo, hi)``, (EMPTY_LO, EMPTY_HI) where no τ_s does. Nothing is stored but
the summaries. Like the stored pairs, a summary is exact at thresholds from one quantum under
the floors up: a pair under both floors is in no group there.

A pair's bytes do not depend on which of its problems is the row: the kernel's two sums swap
places and each keeps its order (``tests/test_summaries.py`` checks it against the triangle).
The candidate lists then need only the chosen queries' pairs: ``query_rows`` computes those
rows in full, on demand. What a row's summary cannot answer is computed from the pairs again,
each once (``triangle_pairs``, half a full-row pass) and never stored: group counts at
thresholds given as numbers, whose undecided bytes need exact values (``row_group_counts``),
and percentiles of every pair's value (``thresholds.percentile_thresholds`` over the triangle).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numba as nb
import numpy as np

from saber_assets.signals.kernels import (
    TILE,
    KernelArrays,
    full_row_kept,
    full_row_pairs,
    signal_block,
)
from saber_assets.signals.thresholds import (
    QMAX,
    Cut,
    ExactSignals,
    Threshold,
    ThresholdChoice,
    chunk_group_counts,
    domain_csr,
    domain_index,
    pick_thresholds,
    viable_intervals,
)

# rows per kernel call: enough tiles of 64 that the kernel's per-call tables are made rarely
BLOCK_ROWS = 256
# rows per triangle block: each pairs with every later row, so a block holds up to n times this
# many pairs at the floors it is asked for
TRIANGLE_ROWS = 1024


@nb.njit(cache=True, nogil=True)
def _summaries_of_block(
    q_rows, tq, sq, kept, position, b0, n_rows, k, t_min, s_min, out
):  # pragma: no cover - compiled
    """out[r, τ_t] = (lo, hi) for the block's rows from the kernel's kept pairs, in the kernel's
    order: a stable counting sort by (the row's place, q_t descending) then each row's sweep.
    The pairs' order within a row and q_t does not change a sweep."""
    start = np.zeros(n_rows * (QMAX + 1) + 1, dtype=np.int64)
    for p in range(kept):
        start[(position[q_rows[p]] - b0) * (QMAX + 1) + (QMAX - tq[p]) + 1] += 1
    for x in range(start.shape[0] - 1):
        start[x + 1] += start[x]
    indptr = np.empty(n_rows + 1, dtype=np.int64)
    for r in range(n_rows + 1):
        indptr[r] = start[r * (QMAX + 1)]
    t_sorted = np.empty(kept, dtype=np.uint8)
    s_sorted = np.empty(kept, dtype=np.uint8)
    for p in range(kept):
        x = (position[q_rows[p]] - b0) * (QMAX + 1) + (QMAX - tq[p])
        t_sorted[start[x]] = tq[p]
        s_sorted[start[x]] = sq[p]
        start[x] += 1
    cnt_hi = np.zeros(QMAX + 1, dtype=np.int64)
    cnt_lo = np.zeros(QMAX + 1, dtype=np.int64)
    lo = np.empty(QMAX, dtype=np.uint8)
    hi = np.empty(QMAX, dtype=np.uint8)
    for r in range(n_rows):
        viable_intervals(
            t_sorted, s_sorted, indptr[r], indptr[r + 1], k, t_min, s_min, cnt_hi, cnt_lo, lo, hi
        )
        out[b0 + r, :, 0] = lo
        out[b0 + r, :, 1] = hi


def viability_summaries(
    arrays: KernelArrays,
    row_start: int,
    row_end: int,
    k: int,
    floors: tuple[int, int],
    threads: int = 1,
    block_rows: int = BLOCK_ROWS,
) -> np.ndarray:
    """summary[row - row_start, τ_t] = (lo, hi) uint8 for the rows [row_start, row_end): the
    τ_s interval at which the row has >= ``k`` candidates in each group, exact for thresholds
    from one quantum under the ``floors`` (bytes) up. ``threads``: blocks of ``block_rows`` rows
    at once (the kernel releases the GIL)."""
    rows = np.arange(row_start, row_end)
    return summaries_of_rows(arrays, rows, k, floors, threads, block_rows)


def summaries_of_rows(
    arrays: KernelArrays,
    rows: np.ndarray,
    k: int,
    floors: tuple[int, int],
    threads: int = 1,
    block_rows: int = BLOCK_ROWS,
) -> np.ndarray:
    """``viability_summaries`` of any distinct rows, in their order."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.empty((len(rows), QMAX, 2), dtype=np.uint8)
    t_min, s_min = max(floors[0] - 1, 0), max(floors[1] - 1, 0)
    position = np.full(arrays.n, -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    kept = [0]  # the last block's pairs: the next block's first guess at its room

    def run(block: tuple[int, int]) -> None:
        b0, b1 = block
        room = max(1024, kept[0] + kept[0] // 2)
        q, _, tq, sq, n_kept = full_row_kept(arrays, rows[b0:b1], *floors, capacity=room)
        kept[0] = n_kept
        _summaries_of_block(q, tq, sq, n_kept, position, b0, b1 - b0, k, t_min, s_min, out)

    blocks = even_blocks(len(rows), block_rows, threads)
    if threads <= 1 or len(blocks) <= 1:
        for block in blocks:
            run(block)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, blocks))
    return out


def even_blocks(n_rows: int, block_rows: int, threads: int) -> list[tuple[int, int]]:
    """[start, end) blocks of about ``block_rows`` rows in whole tiles of 64, as many as a
    multiple of ``threads`` and as even as tiles allow: a full row costs the same wherever it
    lies, so the threads finish their last blocks together instead of one waiting out a whole
    block alone."""
    tiles = -(-n_rows // TILE)
    count = max(1, -(-tiles // max(1, block_rows // TILE)))
    count = min(tiles, -(-count // threads) * threads) if threads > 1 else count
    cuts = [min(n_rows, (tiles * b // max(count, 1)) * TILE) for b in range(count + 1)]
    return [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]


def grown_summaries(
    arrays: KernelArrays,
    row_start: int,
    row_end: int,
    old: np.ndarray,
    n0: int,
    k: int,
    floors: tuple[int, int],
    threads: int = 1,
) -> tuple[np.ndarray, int]:
    """The summaries of rows [row_start, row_end) after the corpus grew from ``n0`` problems to
    the inputs' n, from ``old`` (the rows below ``n0``, summarised at ``n0``): an old row's
    summary changes only if a new problem pairs with it at or above a floor (a pair under both
    is in no group where a summary is exact), so only those rows and the new ones are computed,
    in full. Returns the summaries and how many old rows were recomputed."""
    n = arrays.n
    old_end = min(row_end, n0)
    if len(old) != max(old_end - row_start, 0):
        raise ValueError(f"{len(old)} old summaries for rows [{row_start}, {old_end})")
    out = np.empty((row_end - row_start, QMAX, 2), dtype=np.uint8)
    out[: len(old)] = old
    touched: set[int] = set()
    for b0 in range(n0, n, BLOCK_ROWS):  # the new problems' pairs, a block at a time
        _, c, _, _ = full_row_pairs(arrays, np.arange(b0, min(b0 + BLOCK_ROWS, n)), *floors)
        touched.update(np.unique(c[(c >= row_start) & (c < old_end)]).tolist())
    again = np.array(sorted(touched) + list(range(max(row_start, n0), row_end)), dtype=np.int64)
    if len(again):
        out[again - row_start] = summaries_of_rows(arrays, again, k, floors, threads)
    return out, len(touched)


def summary_counts(
    summary: np.ndarray,
    row_domains: Sequence[Sequence[int]],
    n_domains: int,
    t_min: int = 0,
    s_min: int = 0,
) -> np.ndarray:
    """counts[d, τ_t, τ_s] = rows of domain d viable at (τ_t, τ_s), for τ_t >= t_min and
    τ_s >= s_min (0 elsewhere): ``thresholds.viable_counts`` of the same rows' pairs."""
    if len(row_domains) != len(summary):
        raise ValueError(f"{len(row_domains)} rows of domains for {len(summary)} summaries")
    dom_ptr, dom_idx = domain_csr(row_domains)
    return np.cumsum(_summary_diff(summary, dom_ptr, dom_idx, n_domains, t_min, s_min), axis=2)[
        :, :, :QMAX
    ]


@nb.njit(cache=True)
def _summary_diff(summary, dom_ptr, dom_idx, n_domains, t_min, s_min):  # pragma: no cover
    diff = np.zeros((n_domains, QMAX, QMAX + 1), dtype=np.int64)
    for r in range(summary.shape[0]):
        for tt in range(t_min, QMAX):
            lo = max(np.int64(summary[r, tt, 0]), s_min)
            hi = np.int64(summary[r, tt, 1])
            if lo <= hi:
                for q in range(dom_ptr[r], dom_ptr[r + 1]):
                    diff[dom_idx[q], tt, lo] += 1
                    diff[dom_idx[q], tt, hi + 1] -= 1
    return diff


def thresholds_from_summaries(
    summary: np.ndarray,
    row_domains: Sequence[Sequence[str]],
    domains: Sequence[str],
    q_min: int,
    k: int,
    floor_topic_q: int = 0,
    floor_summary_q: int = 0,
) -> ThresholdChoice:
    """``thresholds.derive_thresholds`` from the rows' summaries (made with this ``k``): the
    same rule, the same answer where both look (at and above one quantum under the floors)."""
    index, rows = domain_index(row_domains, domains)
    t_min, s_min = max(floor_topic_q - 1, 0), max(floor_summary_q - 1, 0)
    counts = summary_counts(summary, rows, len(domains), t_min, s_min)
    return pick_thresholds(counts, index, q_min, k)


def viable_at(summary: np.ndarray, topic_q: int, summary_q: int) -> np.ndarray:
    """Which rows are viable at (τ_t, τ_s) in quanta."""
    lo, hi = summary[:, topic_q, 0], summary[:, topic_q, 1]
    return (lo <= summary_q) & (summary_q <= hi)


def query_rows(
    arrays: KernelArrays,
    rows: Sequence[int],
    floor_topic: int,
    floor_summary: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every pair of the given rows with any other problem whose topic or summary byte reaches
    its floor: (query row, candidate row, q_t, q_s), by query row then candidate row. The chosen
    queries' pairs, which their candidate lists are drawn from."""
    wanted = np.array(sorted({int(x) for x in rows}), dtype=np.int64)
    return full_row_pairs(arrays, wanted, floor_topic, floor_summary)


def triangle_pairs(
    arrays: KernelArrays,
    floor_topic: int,
    floor_summary: int,
    threads: int = 1,
    block_rows: int | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Every unordered pair (i < j) whose topic or summary byte reaches its floor, as chunks
    (i, j, q_t, q_s) of a block of rows each, computed as they are read and never stored: what
    the stored pairs' readers (``thresholds.group_counts``, ``percentile_thresholds``) take,
    for half the kernel work of full rows."""
    kept, block_rows = 0, block_rows or TRIANGLE_ROWS
    for r0 in range(0, arrays.n, block_rows):
        r1 = min(r0 + block_rows, arrays.n)
        room = max(1024, (kept + kept // 2) // threads)  # per thread's range: the last block's
        indptr, cols, tq, sq, _ = signal_block(
            *arrays, r0, r1, floor_topic, floor_summary, n_bins=1, capacity=room, threads=threads
        )
        kept = len(cols)
        yield np.repeat(np.arange(r0, r1), np.diff(indptr)), cols.astype(np.int64), tq, sq


def row_group_counts(
    arrays: KernelArrays,
    t_thr: Threshold,
    s_thr: Threshold,
    exact: ExactSignals | None = None,
    threads: int = 1,
) -> np.ndarray:
    """(n, 3) topic-only, summary-only and both counts of every row at given thresholds, over
    the triangle (each pair once, counted for both its rows), nothing stored: what a threshold
    the summaries cannot answer (one given as a number, ``Cut``: its undecided bytes need the
    exact values) is counted with."""
    floors = [thr.lowest if isinstance(thr, Cut) else min(thr + 1, QMAX) for thr in (t_thr, s_thr)]
    chunks = triangle_pairs(arrays, *floors, threads=threads)
    return chunk_group_counts(chunks, arrays.n, t_thr, s_thr, exact)
