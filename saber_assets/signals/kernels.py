"""Numba kernels for the two pair signals (DESIGN.md, pair signals); no Dagster.

topic   = symmetric Best-Match Average of Lin similarity between topic sets A and B:
          (Σ_a max_b Lin[a, b] + Σ_b max_a Lin[a, b]) / (|A| + |B|)
summary = Jaccard of token sets |A ∩ B| / |A ∪ B|

Both are 0 when either set is empty (documented choice: no evidence, no relevance).

Inputs are CSR arrays (``indptr``, ``indices``) of *distinct* ids per row: topic ids index the
square ``lin`` table of the distinct topics actually used; token ids are dense ``0..V-1``.

The block kernel computes every unordered pair (i, j), i in a row block, j > i, in 64×64 tiles:
- topic: per row tile, ``best_row[t, r] = max_{a∈A_r} Lin[a, t]`` over all used topics (built
  once, reused for every column), so Σ_b max_a is a sum of contiguous 64-lane rows. The Lin
  columns of the row tile's own topics ``u`` are gathered once per row tile into a compact
  topic-major table (``n_union`` floats per topic), so a column tile's
  ``best_col[u, c] = max_{b∈B_c} Lin[u, b]`` reads a few contiguous rows instead of scattered
  Lin entries; transposed, Σ_a max_b is again 64-lane adds. Frequent topics get small ids
  (``prepare_inputs``) so their rows stay in cache. The division by |A| + |B| is a table of
  reciprocals; all 64 intersection sizes of a column are extracted lane by lane before the
  per-pair loop.
- summary: bit-sliced over the 64 rows of the tile: a uint64 mask per token (which tile rows hold
  it); a column's tokens are added into 8 bit-planes with a ripple carry, giving all 64
  intersection sizes at once; a uint8 table over (intersection, union) gives the quantised value.
Values are quantised to uint8 (q = round(255·v)); pairs with topic ≥ floor or summary ≥ floor
(quantised) are kept; every pair lands in its row's coarse 2-D histogram, unless the pass counts
none (a full-row pass keeps its pairs and nothing else: the count was a random write per pair).
Kept pairs that outgrow their buffers stop the kernel at the row tile that did not fit, and it
resumes there with larger ones (``kept_pairs``): no pair is computed twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numba as nb
import numpy as np

SCALE = 255  # value = q / SCALE; quantisation error <= 1 / (2 * SCALE)
TILE = 64
PLANES = 8  # bit-planes of the intersection counter: token sets of up to 255 tokens
MAX_TOKENS = (1 << PLANES) - 1


class KernelArrays(NamedTuple):
    """What the kernels read of a corpus: topic CSR (local topic ids), the Lin table of the used
    topics, summary-token CSR (``prepare.SignalInputs.arrays``)."""

    t_ptr: np.ndarray
    t_idx: np.ndarray
    lin: np.ndarray
    s_ptr: np.ndarray
    s_idx: np.ndarray

    @property
    def n(self) -> int:
        return len(self.t_ptr) - 1


def quantize(v: np.ndarray | float) -> np.ndarray:
    return np.floor(np.asarray(v, dtype=np.float64) * SCALE + 0.5).astype(np.uint8)


def to_csr(sets: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Lists of ids -> CSR of the distinct ids per row (sorted)."""
    rows = [np.unique(np.asarray(s, dtype=np.int64)) for s in sets]
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(r) for r in rows])
    indices = (
        np.concatenate(rows).astype(np.int32)
        if rows and indptr[-1]
        else np.zeros(0, dtype=np.int32)
    )
    return indptr, indices


# ------------------------------------------------------------------------------- dense (small N)


@nb.njit(cache=True)
def _bma_pair(a_idx, b_idx, lin):
    na, nb_ = a_idx.shape[0], b_idx.shape[0]
    if na == 0 or nb_ == 0:
        return 0.0
    s = 0.0
    for x in range(na):
        m = 0.0
        for y in range(nb_):
            v = lin[a_idx[x], b_idx[y]]
            if v > m:
                m = v
        s += m
    for y in range(nb_):
        m = 0.0
        for x in range(na):
            v = lin[a_idx[x], b_idx[y]]
            if v > m:
                m = v
        s += m
    return s / (na + nb_)


@nb.njit(cache=True)
def _jaccard_pair(a_idx, b_idx):
    # both sorted and distinct
    na, nb_ = a_idx.shape[0], b_idx.shape[0]
    if na == 0 or nb_ == 0:
        return 0.0
    i = j = inter = 0
    while i < na and j < nb_:
        if a_idx[i] == b_idx[j]:
            inter += 1
            i += 1
            j += 1
        elif a_idx[i] < b_idx[j]:
            i += 1
        else:
            j += 1
    return inter / (na + nb_ - inter)


@nb.njit(cache=True)
def _dense(t_ptr, t_idx, lin, s_ptr, s_idx, topic, summary):
    n = t_ptr.shape[0] - 1
    for i in range(n):
        for j in range(i + 1, n):
            t = _bma_pair(t_idx[t_ptr[i] : t_ptr[i + 1]], t_idx[t_ptr[j] : t_ptr[j + 1]], lin)
            s = _jaccard_pair(s_idx[s_ptr[i] : s_ptr[i + 1]], s_idx[s_ptr[j] : s_ptr[j + 1]])
            topic[i, j] = topic[j, i] = t
            summary[i, j] = summary[j, i] = s


def bma_jaccard_dense(
    topic_sets: Sequence[Sequence[int]], lin: np.ndarray, token_sets: Sequence[Sequence[int]]
) -> tuple[np.ndarray, np.ndarray]:
    """Both signals for all pairs of a small corpus: two N×N float32 matrices, diagonal 0.

    Sets may hold duplicates (they are sets); token ids may be any non-negative ints.
    """
    if len(topic_sets) != len(token_sets):
        raise ValueError(f"{len(topic_sets)} topic sets but {len(token_sets)} token sets")
    lin = np.ascontiguousarray(lin, dtype=np.float32)
    t_ptr, t_idx = to_csr(topic_sets)
    if t_idx.size and (t_idx.min() < 0 or t_idx.max() >= lin.shape[0]):
        raise ValueError(f"topic ids must lie in [0, {lin.shape[0]}) (the Lin table's size)")
    s_ptr, s_idx = to_csr(token_sets)
    n = len(topic_sets)
    topic = np.zeros((n, n), dtype=np.float32)
    summary = np.zeros((n, n), dtype=np.float32)
    _dense(t_ptr, t_idx, lin, s_ptr, s_idx, topic, summary)
    return topic, summary


# ---------------------------------------------------------------------------- plain pairwise loop


@nb.njit(cache=True)
def pairwise_block_naive(t_ptr, t_idx, lin, s_ptr, s_idx, row_start, row_end):
    """Baseline for the benchmark: the straightforward pairwise loop, returning the sum of signals."""
    n = t_ptr.shape[0] - 1
    acc = 0.0
    for i in range(row_start, row_end):
        for j in range(i + 1, n):
            acc += _bma_pair(t_idx[t_ptr[i] : t_ptr[i + 1]], t_idx[t_ptr[j] : t_ptr[j + 1]], lin)
            acc += _jaccard_pair(s_idx[s_ptr[i] : s_ptr[i + 1]], s_idx[s_ptr[j] : s_ptr[j + 1]])
    return acc


# ------------------------------------------------------------------------------- block kernel


def jaccard_lut() -> np.ndarray:
    """q(Jaccard) for every (intersection, union) with sets of up to MAX_TOKENS tokens."""
    inter = np.arange(MAX_TOKENS + 1)[:, None]
    union = np.arange(2 * MAX_TOKENS + 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        v = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
    return quantize(np.clip(v, 0, 1))


@nb.njit(cache=True, fastmath=True, nogil=True)
def _block(
    t_ptr,
    t_idx,
    lin,
    s_ptr,
    s_idx,
    lut,
    row_of,
    row_start,
    row_end,
    floor_t,
    floor_s,
    n_bins,
    out_rows,
    out_cols,
    out_t,
    out_s,
    hist,
    store,
    both,
    full,
    counting,
    progress,
):
    n = t_ptr.shape[0] - 1
    n_topics = lin.shape[0]
    # a resumed call starts at the row tile whose pairs did not fit, after the pairs kept before it
    kept = progress[1]
    best_row = np.zeros((n_topics, TILE), dtype=np.float32)
    token_mask = np.zeros(np.int64(s_idx.max()) + 1 if s_idx.shape[0] > 0 else 1, dtype=np.uint64)
    local_of = np.full(n_topics, -1, dtype=np.int32)
    tile_pos = np.full(n if full else 0, -1, dtype=np.int64)  # row -> its place in the tile
    union_topics = np.empty(n_topics, dtype=np.int32)
    max_set = 1
    for p in range(row_start, row_end):
        i = row_of[p]
        if t_ptr[i + 1] - t_ptr[i] > max_set:
            max_set = t_ptr[i + 1] - t_ptr[i]
    max_union = min(n_topics, TILE * max_set)
    col_max = np.zeros(TILE * max_union, dtype=np.float32)
    best_col = np.zeros((max_union, TILE), dtype=np.float32)
    gathered = np.zeros(np.int64(n_topics) * max_union, dtype=np.float32)
    fwd = np.zeros((TILE, TILE), dtype=np.float32)  # [c, r]: Σ_{b∈B_c} max_{a∈A_r}
    rev = np.zeros((TILE, TILE), dtype=np.float32)  # [r, c]: Σ_{a∈A_r} max_{b∈B_c}
    planes = np.zeros(PLANES, dtype=np.uint64)
    inter_r = np.zeros(TILE, dtype=np.int64)
    row_na = np.zeros(TILE, dtype=np.int64)
    row_ns = np.zeros(TILE, dtype=np.int64)
    max_all = 1
    for i in range(n):
        if t_ptr[i + 1] - t_ptr[i] > max_all:
            max_all = t_ptr[i + 1] - t_ptr[i]
    recip = np.zeros(2 * max_all + 2, dtype=np.float32)  # 1 / (|A| + |B|)
    for x in range(1, recip.shape[0]):
        recip[x] = 1.0 / x
    bin_of = np.empty(256, dtype=np.int64)
    for q in range(256):
        b = q * n_bins // 256
        bin_of[q] = b if b < n_bins else n_bins - 1
    for r0 in range(progress[0], row_end, TILE):
        rn = min(TILE, row_end - r0)
        tile_kept = kept
        # --- per row tile: best_row over all topics, token masks, the tile's own topic set
        best_row[:, :] = 0.0
        n_union = 0
        for r in range(rn):
            i = row_of[r0 + r]
            for k in range(t_ptr[i], t_ptr[i + 1]):
                a = t_idx[k]
                if local_of[a] < 0:
                    local_of[a] = n_union
                    union_topics[n_union] = a
                    n_union += 1
                for t in range(n_topics):
                    v = lin[a, t]
                    if v > best_row[t, r]:
                        best_row[t, r] = v
            for k in range(s_ptr[i], s_ptr[i + 1]):
                token_mask[s_idx[k]] |= np.uint64(1) << np.uint64(r)
            if full:
                tile_pos[i] = r
        for r in range(TILE):
            row_na[r] = 0
            row_ns[r] = 0
        for r in range(rn):
            i = row_of[r0 + r]
            row_na[r] = t_ptr[i + 1] - t_ptr[i]
            row_ns[r] = s_ptr[i + 1] - s_ptr[i]
        # Lin columns of the tile's own topics, row-major by topic with stride n_union
        for t0 in range(0, n_topics, TILE):  # blocked transpose: contiguous reads, cached writes
            t1 = min(t0 + TILE, n_topics)
            for u in range(n_union):
                a = union_topics[u]
                for t in range(t0, t1):
                    gathered[np.int64(t) * n_union + u] = lin[a, t]
        # --- column tiles from the row tile's first row onwards (``full``: every column)
        for c0 in range(0 if full else r0, n, TILE):
            cn = min(TILE, n - c0)
            # best_col over the row tile's topics only: max over a column's topics of the
            # gathered rows (n_union contiguous floats each), then transposed for 64-lane sums
            for c in range(cn):
                j = c0 + c
                base_c = c * n_union
                for u in range(n_union):
                    col_max[base_c + u] = 0.0
                for k in range(t_ptr[j], t_ptr[j + 1]):
                    base_b = np.int64(t_idx[k]) * n_union
                    for u in range(n_union):
                        v = gathered[base_b + u]
                        if v > col_max[base_c + u]:
                            col_max[base_c + u] = v
            for u in range(n_union):
                for c in range(cn):
                    best_col[u, c] = col_max[c * n_union + u]
            # forward sums: for column c, add best_row rows of its topics (64 lanes over r)
            for c in range(cn):
                j = c0 + c
                for r in range(TILE):
                    fwd[c, r] = 0.0
                for k in range(t_ptr[j], t_ptr[j + 1]):
                    b = t_idx[k]
                    for r in range(TILE):
                        fwd[c, r] += best_row[b, r]
            # reverse sums: for row r, add best_col rows of its topics (64 lanes over c)
            for r in range(rn):
                i = row_of[r0 + r]
                for c in range(TILE):
                    rev[r, c] = 0.0
                for k in range(t_ptr[i], t_ptr[i + 1]):
                    u = local_of[t_idx[k]]
                    for c in range(TILE):
                        rev[r, c] += best_col[u, c]
            for c in range(cn):
                j = c0 + c
                nb_ = t_ptr[j + 1] - t_ptr[j]
                ns_b = s_ptr[j + 1] - s_ptr[j]
                # bit-sliced intersection sizes of column j's tokens with every tile row
                for p in range(PLANES):
                    planes[p] = 0
                n_planes = 0  # intersections never exceed |B|: extract only its bit-length
                while (1 << n_planes) <= ns_b:
                    n_planes += 1
                for k in range(s_ptr[j], s_ptr[j + 1]):
                    carry = token_mask[s_idx[k]]
                    p = 0
                    while carry != 0 and p < PLANES:
                        nxt = planes[p] & carry
                        planes[p] ^= carry
                        carry = nxt
                        p += 1
                r_stop = rn if full else min(rn, j - r0)  # upper triangle: i < j
                # all 64 intersection sizes at once, lane by lane (vectorises)
                for r in range(TILE):
                    inter_r[r] = 0
                for p in range(n_planes):
                    plane = planes[p]
                    for r in range(TILE):
                        inter_r[r] |= np.int64((plane >> np.uint64(r)) & np.uint64(1)) << p
                skip = tile_pos[j] if full else -1  # a problem is not its own pair
                for r in range(r_stop):
                    if r == skip:
                        continue
                    tq = np.uint8(0)
                    if nb_ > 0 and row_na[r] > 0:
                        # v in [0, 1]: truncation of v·255 + 0.5 rounds
                        tq = np.uint8(
                            np.int32((fwd[c, r] + rev[r, c]) * recip[row_na[r] + nb_] * 255.0 + 0.5)
                        )
                    inter = inter_r[r]
                    sq = lut[inter, row_ns[r] + ns_b - inter]
                    if counting and both:  # in both rows' histograms, indexed globally
                        i = row_of[r0 + r]
                        hist[i, bin_of[tq], bin_of[sq]] += 1
                        hist[j, bin_of[tq], bin_of[sq]] += 1
                    elif counting:
                        hist[r0 + r - row_start, bin_of[tq], bin_of[sq]] += 1
                    if store and (tq >= floor_t or sq >= floor_s):
                        if kept >= out_rows.shape[0]:
                            # buffers full: the caller grows them and resumes at this row tile
                            # (its histogram rows cleared), keeping the tiles before it
                            progress[0] = r0
                            progress[1] = tile_kept
                            return -1
                        out_rows[kept] = row_of[r0 + r]
                        out_cols[kept] = j
                        out_t[kept] = tq
                        out_s[kept] = sq
                        kept += 1
        # --- reset the per-tile state
        for u in range(n_union):
            local_of[union_topics[u]] = -1
        for r in range(rn):
            i = row_of[r0 + r]
            for k in range(s_ptr[i], s_ptr[i + 1]):
                token_mask[s_idx[k]] = 0
            if full:
                tile_pos[i] = -1
    return kept


NO_HISTOGRAM = np.zeros((1, 1, 1), dtype=np.uint32)  # a pass that counts no pair


def kept_pairs(
    run, row_start: int, row_end: int, capacity: int, hist: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The block kernel's kept pairs (rows, cols, q_t, q_s buffers and how many), run by
    ``run(rows, cols, q_t, q_s, progress)`` into buffers of ``capacity`` pairs at first. When
    they fill up, the kernel stops at the row tile that did not fit; the buffers grow to what
    the tiles so far predict for the whole range (at least twice the room), keep the pairs
    kept, and the kernel resumes at that tile (its rows of ``hist``, indexed from
    ``row_start``, cleared): no pair is computed twice."""
    buffers = [np.empty(capacity, dtype=t) for t in (np.int64, np.int32, np.uint8, np.uint8)]
    progress = np.array([row_start, 0], dtype=np.int64)
    while True:
        kept = run(*buffers, progress)
        if kept >= 0:
            return (*buffers, kept)
        at, have = int(progress[0]), int(progress[1])
        done = at - row_start
        predicted = have * (row_end - row_start) // done + have // 4 if done else 0
        # the first tile did not fit: nothing to predict from, and each try computes it again
        capacity = max((2 if done else 8) * capacity, predicted)
        grown = [np.empty(capacity, dtype=b.dtype) for b in buffers]
        for new, old in zip(grown, buffers, strict=True):
            new[:have] = old[:have]
        buffers = grown
        if hist is not None:
            hist[done : done + TILE] = 0


def split_rows(row_start: int, row_end: int, n: int, parts: int) -> list[tuple[int, int]]:
    """Split [row_start, row_end) into up to ``parts`` tile-aligned ranges of about equal pair
    counts (row i has n − 1 − i pairs with later rows)."""
    pairs = np.cumsum(n - 1 - np.arange(row_start, row_end, dtype=np.int64))
    if parts <= 1 or row_end - row_start < 2 * TILE or pairs[-1] == 0:
        return [(row_start, row_end)]
    cuts = [row_start]
    for k in range(1, parts):
        r = row_start + int(np.searchsorted(pairs, pairs[-1] * k / parts))
        r = row_start + (r - row_start) // TILE * TILE
        if cuts[-1] < r < row_end:
            cuts.append(r)
    return list(zip(cuts, [*cuts[1:], row_end], strict=True))


def signal_block(
    t_ptr: np.ndarray,
    t_idx: np.ndarray,
    lin: np.ndarray,
    s_ptr: np.ndarray,
    s_idx: np.ndarray,
    row_start: int,
    row_end: int,
    floor_topic: int,
    floor_summary: int,
    n_bins: int = 16,
    capacity: int | None = None,
    threads: int = 1,
):
    """All pairs (i, j), row_start <= i < row_end, j > i. Returns CSR-like kept pairs sorted by
    (row, column): (indptr over the block's rows, cols int32, topic uint8, summary uint8) and the
    per-row histograms hist[row - row_start, topic_bin, summary_bin] (uint32, all pairs).
    ``threads`` > 1 splits the rows into ranges of equal pair counts computed at once (the kernel
    releases the GIL), so one shard run uses every core it is given."""
    lin = _checked_inputs(lin, s_ptr, s_idx)[0]
    ranges = split_rows(row_start, row_end, len(t_ptr) - 1, threads)
    args = (t_ptr, t_idx, lin, s_ptr, s_idx)
    if len(ranges) == 1:
        return _signal_range(
            *args, row_start, row_end, floor_topic, floor_summary, n_bins, capacity
        )
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(ranges)) as pool:
        parts = list(
            pool.map(
                lambda r: _signal_range(
                    *args, r[0], r[1], floor_topic, floor_summary, n_bins, capacity
                ),
                ranges,
            )
        )
    offsets = np.cumsum([0] + [p[0][-1] for p in parts[:-1]])
    indptr = np.concatenate(
        [parts[0][0]] + [p[0][1:] + off for p, off in zip(parts[1:], offsets[1:], strict=True)]
    )
    return (indptr, *(np.concatenate([p[k] for p in parts]) for k in range(1, 5)))


def _signal_range(
    t_ptr,
    t_idx,
    lin,
    s_ptr,
    s_idx,
    row_start,
    row_end,
    floor_topic,
    floor_summary,
    n_bins,
    capacity,
):
    rows = row_end - row_start
    hist = np.zeros((rows, n_bins, n_bins), dtype=np.uint32)
    out_rows, out_cols, out_t, out_s, kept = _kept_block(
        (t_ptr, t_idx, lin, s_ptr, s_idx),
        np.arange(len(t_ptr) - 1, dtype=np.int64),
        row_start,
        row_end,
        (floor_topic, floor_summary),
        capacity or max(1024, rows * 64),
        hist,
    )
    order = np.lexsort((out_cols[:kept], out_rows[:kept]))
    local = out_rows[:kept][order] - row_start
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(local, minlength=rows), out=indptr[1:])
    return indptr, out_cols[:kept][order], out_t[:kept][order], out_s[:kept][order], hist


def row_histograms(
    t_ptr: np.ndarray,
    t_idx: np.ndarray,
    lin: np.ndarray,
    s_ptr: np.ndarray,
    s_idx: np.ndarray,
    n_bins: int = 16,
    threads: int = 1,
    rows: tuple[int, int] | None = None,
) -> np.ndarray:
    """hist[r, topic_bin, summary_bin]: every pair of row r with any other row (both
    directions), counted by coarse bins of both quantised signals (bin = q · n_bins // 256).
    The block kernel over every pair j > i, storing nothing: each thread adds into its own
    (n, bins, bins) array, summed at the end. ``rows``: only the pairs whose smaller index
    lies in that range."""
    lin, lut = _checked_inputs(lin, s_ptr, s_idx)
    n = len(t_ptr) - 1
    none_i64, none_i32, none_u8 = (np.empty(1, t) for t in (np.int64, np.int32, np.uint8))

    def run(r: tuple[int, int]) -> np.ndarray:
        hist = np.zeros((n, n_bins, n_bins), dtype=np.uint32)
        _block(
            t_ptr, t_idx, lin, s_ptr, s_idx, lut, np.arange(n, dtype=np.int64), r[0], r[1],
            np.uint8(0), np.uint8(0), n_bins,
            none_i64, none_i32, none_u8, none_u8, hist, False, True, False, True,
            np.array([r[0], 0], dtype=np.int64),
        )  # fmt: skip
        return hist

    ranges = split_rows(*(rows or (0, n)), n, threads)
    if len(ranges) == 1:
        return run(ranges[0])
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(ranges)) as pool:
        parts = pool.map(run, ranges)
        total = next(parts)
        for part in parts:
            total += part
            del part
    return total


def full_row_kept(
    arrays: KernelArrays,
    rows: np.ndarray,
    floor_topic: int,
    floor_summary: int,
    capacity: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The given rows' pairs with every other problem whose topic or summary byte reaches its
    floor, as the kernel keeps them: (row, other row, q_t, q_s) buffers and how many pairs they
    hold, in tiles of 64 of ``rows`` (rows need not be neighbours), within a tile by the other
    row, then by the row's place. ``capacity``: pairs to make room for at first."""
    t_ptr, t_idx, lin, s_ptr, s_idx = arrays
    lin = _checked_inputs(lin, s_ptr, s_idx)[0]
    rows = _distinct_rows(rows, arrays.n)
    return _kept_block(
        (t_ptr, t_idx, lin, s_ptr, s_idx),
        rows,
        0,
        len(rows),
        (floor_topic, floor_summary),
        capacity or max(1024, len(rows) * 64),
        full=True,
    )


def _kept_block(inputs, row_of, row_start, row_end, floors, capacity, hist=None, full=False):
    """``kept_pairs`` of the block kernel over ``row_of[row_start:row_end]`` storing at the
    ``floors`` (bytes); counting every pair into ``hist`` (rows from ``row_start``) when given;
    ``full``: each row against every other problem, else the later ones."""
    lut = jaccard_lut()
    counting = hist is not None
    n_bins = hist.shape[1] if counting else 1

    def run(o_rows, o_cols, o_t, o_s, progress):
        return _block(
            *inputs, lut, row_of, row_start, row_end, np.uint8(floors[0]), np.uint8(floors[1]),
            n_bins, o_rows, o_cols, o_t, o_s, hist if counting else NO_HISTOGRAM, True, False,
            full, counting, progress,
        )  # fmt: skip

    return kept_pairs(run, row_start, row_end, capacity, hist)


def full_row_pairs(
    arrays: KernelArrays,
    rows: np.ndarray,
    floor_topic: int,
    floor_summary: int,
    capacity: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``full_row_kept``'s pairs as (row, other row, q_t, q_s), by the order of ``rows`` then the
    other row."""
    rows = _distinct_rows(rows, arrays.n)
    out_rows, out_cols, out_t, out_s, kept = full_row_kept(
        arrays, rows, floor_topic, floor_summary, capacity
    )
    position = np.empty(arrays.n, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    order = np.lexsort((out_cols[:kept], position[out_rows[:kept]]))
    return (out_rows[:kept][order], out_cols[:kept][order].astype(np.int64), out_t[:kept][order],
            out_s[:kept][order])  # fmt: skip


def _distinct_rows(rows: np.ndarray, n: int) -> np.ndarray:
    """Rows for a full-row pass: distinct (a tile skips one column per row as its own) and in
    the corpus."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if len(np.unique(rows)) != len(rows) or (len(rows) and not 0 <= rows.min() <= rows.max() < n):
        raise ValueError(f"full rows must be distinct rows in [0, {n})")
    return rows


def _checked_inputs(
    lin: np.ndarray, s_ptr: np.ndarray, s_idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's Lin table (float32, contiguous) and Jaccard table; token sets over the cap
    refused."""
    if s_idx.size and np.diff(s_ptr).max() > MAX_TOKENS:
        raise ValueError(f"a token set has more than {MAX_TOKENS} distinct tokens")
    return np.ascontiguousarray(lin, dtype=np.float32), jaccard_lut()


# ------------------------------------------------------------------------ exact pairs, on demand


@nb.njit(cache=True)
def _pair_values(t_ptr, t_idx, lin, s_ptr, s_idx, rows, cols, topic, summary):
    for k in range(rows.shape[0]):
        i, j = rows[k], cols[k]
        topic[k] = _bma_pair(t_idx[t_ptr[i] : t_ptr[i + 1]], t_idx[t_ptr[j] : t_ptr[j + 1]], lin)
        summary[k] = _jaccard_pair(s_idx[s_ptr[i] : s_ptr[i + 1]], s_idx[s_ptr[j] : s_ptr[j + 1]])


def pair_values(
    t_ptr: np.ndarray,
    t_idx: np.ndarray,
    lin: np.ndarray,
    s_ptr: np.ndarray,
    s_idx: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Both signals of the pairs (rows[k], cols[k]) unquantised: what the block kernel rounds to
    a byte, for the few pairs whose byte cannot decide a threshold."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    cols = np.ascontiguousarray(cols, dtype=np.int64)
    topic = np.zeros(rows.shape[0], dtype=np.float64)
    summary = np.zeros(rows.shape[0], dtype=np.float64)
    if rows.shape[0]:
        _pair_values(t_ptr, t_idx, lin, s_ptr, s_idx, rows, cols, topic, summary)
    return topic, summary
