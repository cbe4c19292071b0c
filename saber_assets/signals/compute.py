"""Shard computation: upper segments for a first full run, lower segments for appended rows.

Every unordered pair {i < j} is stored exactly once: in the upper segment of i's row block when
j was already in the corpus at that computation (j < N there), else in the lower segment of j
(rows appended later are paired with every earlier row). So appending problems computes only the
new rows against all rows and leaves finished shards untouched.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from saber_assets.signals.kernels import SCALE, signal_block
from saber_assets.signals.prepare import SignalInputs
from saber_assets.signals.shards import LOWER, UPPER, Shard


def csr_take(ptr: np.ndarray, idx: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``order`` of a CSR matrix, as a new CSR."""
    lengths = np.diff(ptr)[order]
    new_ptr = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_ptr[1:])
    take = (
        np.concatenate([np.arange(ptr[r], ptr[r + 1]) for r in order])
        if len(order)
        else np.zeros(0, np.int64)
    )
    return new_ptr, idx[take.astype(np.int64)] if take.size else idx[:0]


def compute_segment(
    inputs: SignalInputs,
    kind: int,
    row_start: int,
    row_end: int,
    floor_topic: int,
    floor_summary: int,
    bins: int,
    n_cols: int | None = None,
    threads: int = 1,
) -> Shard:
    """An upper segment pairs rows [row_start, row_end) with later rows below ``n_cols`` (default:
    all); a lower segment pairs them with every earlier row. The header records the corpus-prefix
    version the segment depends on (its N)."""
    if kind == UPPER:
        n = inputs.n if n_cols is None else n_cols
        t_ptr, s_ptr = inputs.t_ptr[: n + 1], inputs.s_ptr[: n + 1]
        indptr, cols, tq, sq, hist = signal_block(
            t_ptr,
            inputs.t_idx[: t_ptr[-1]],
            inputs.lin,
            s_ptr,
            inputs.s_idx[: s_ptr[-1]],
            row_start,
            row_end,
            floor_topic,
            floor_summary,
            bins,
            threads=threads,
        )
        version = inputs.prefix_version(n)
        return Shard(
            UPPER,
            n,
            row_start,
            row_end,
            floor_topic,
            floor_summary,
            SCALE,
            version,
            indptr,
            cols,
            tq,
            sq,
            hist,
        )
    # Lower: reverse the prefix [0, row_end) so "later in reversed order" means "earlier row".
    rev = np.arange(row_end - 1, -1, -1)
    t_ptr, t_idx = csr_take(inputs.t_ptr, inputs.t_idx, rev)
    s_ptr, s_idx = csr_take(inputs.s_ptr, inputs.s_idx, rev)
    n_rows = row_end - row_start
    indptr_r, cols_r, tq, sq, hist_r = signal_block(
        t_ptr,
        t_idx,
        inputs.lin,
        s_ptr,
        s_idx,
        0,
        n_rows,
        floor_topic,
        floor_summary,
        bins,
        threads=threads,
    )
    rows_r = np.repeat(np.arange(n_rows), np.diff(indptr_r))
    rows = row_end - 1 - rows_r
    cols = (row_end - 1 - cols_r.astype(np.int64)).astype(np.int32)
    order = np.lexsort((cols, rows))
    local = rows[order] - row_start
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(local, minlength=n_rows), out=indptr[1:])
    version = inputs.prefix_version(row_end)
    return Shard(
        LOWER,
        row_end,
        row_start,
        row_end,
        floor_topic,
        floor_summary,
        SCALE,
        version,
        indptr,
        cols[order],
        tq[order],
        sq[order],
        hist_r[::-1].copy(),
    )


def memory_available() -> int:
    """Bytes this process may use: physical memory, or the cgroup's limit where lower (a pod)."""
    limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            value = Path(f).read_text().strip()
        except OSError:
            continue
        if value.isdigit():
            limit = min(limit, int(value))
    return limit
