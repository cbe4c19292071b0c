"""The stored pairs, read one shard file at a time: memory bounded by a budget, not by the corpus.

At the paper's size the stored pairs outgrow memory (~4.5G pairs at 283K problems and the default
floors: ~60 GB as arrays). Candidate selection needs only per-row counts and the chosen queries'
pairs, so it streams shard by shard (``chunks``). The threshold sweep needs each row's pairs in
both directions together: ``row_blocks`` gathers them for a group of consecutive rows at a time,
the groups cut from the rows' degrees so that one group's buffers fit the budget, each group one
pass over the shard files that can hold its pairs (a row whose pairs alone exceed the budget is
a group by itself).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from saber_assets.signals.shards import UPPER, Shard, ShardError, read_header, read_shard
from saber_assets.signals.thresholds import RowBlock, row_pairs, sort_rows_by_topic

# bytes a gathered group holds per pair direction (q_t and q_s) and per row (offsets, cursors)
BYTES_PER_DIRECTION = 2
BYTES_PER_ROW = 16
COLLECT_ABOVE = 1 << 28  # budgets from which a block left alive is worth a garbage collection

Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
# bytes per stored pair held in memory: i, j (int32), q_t, q_s, and the 4 the threshold sweep's
# both-direction gathering adds (``thresholds.row_pairs``)
BYTES_HELD = 14


@dataclass
class StoredPairs:
    """The shard files of one corpus of ``n`` problems; ``versions`` maps a segment's N to the
    corpus-prefix version it must carry (a shard of another corpus is refused on every read)."""

    paths: list[Path]
    n: int
    versions: dict[int, str] | None = None
    # pairs per chunk at most (a shard of a large corpus holds hundreds of millions): ~10 bytes
    # each while a chunk is in use, beyond the shard file's own bytes
    chunk_pairs: int = 1 << 25

    @property
    def total_pairs(self) -> int:
        return sum(read_header(p)["pairs"] for p in self.paths)

    def held(self, budget_bytes: int) -> StoredPairs | HeldPairs:
        """The pairs read once, where they fit ``budget_bytes``: every later pass (degrees,
        gathering, the candidates' two passes) then reads memory, not the files. Else these
        files, read per pass."""
        if self.total_pairs * BYTES_HELD > budget_bytes:
            return self
        parts = list(self.chunks())
        empty = (np.zeros(0, np.int32),) * 2 + (np.zeros(0, np.uint8),) * 2
        arrays = tuple(np.concatenate(c) for c in zip(*parts, strict=True)) if parts else empty
        del parts
        return HeldPairs(self, *arrays)

    def floors(self) -> tuple[int, int]:
        """The storage floors every shard file holds pairs from (bytes; the highest of each):
        counts are exact at thresholds from one byte below them up."""
        heads = [read_header(p) for p in self.paths]
        return (
            max((h["floor_topic"] for h in heads), default=0),
            max((h["floor_summary"] for h in heads), default=0),
        )

    def digests(self) -> list[str]:
        """Each file's name and payload checksum (from its header): what the pairs' content is."""
        return [f"{p.name}:{read_header(p)['checksum'].hex()}" for p in self.paths]

    def shards(self, below: int | None = None) -> Iterator[Shard]:
        """Every shard file, checked; with ``below``, only those that may hold a pair of a row
        under it (an upper segment's rows and columns all lie at or past its first row)."""
        for path in self.paths:
            if below is not None:
                h = read_header(path)
                if h["kind"] == UPPER and h["row_start"] >= below:
                    continue
            shard = read_shard(path, with_hist=False)
            if self.versions is not None:
                want = self.versions.get(shard.n)
                if want != shard.corpus_version:
                    raise ShardError(
                        f"{path}: shard of corpus version {shard.corpus_version!r}, expected {want!r}: recompute it"
                    )
            yield shard
            del shard  # one file's bytes in memory at a time: not this one while reading the next

    def chunks(self) -> Iterator[Chunk]:
        """(i < j as int32, topic q, summary q) of every stored pair, a run of whole rows of one
        shard file at a time, at most ``chunk_pairs`` pairs unless one row holds more."""
        for shard in self.shards():
            ptr = shard.indptr
            lo = 0
            while lo < len(ptr) - 1:
                hi = int(np.searchsorted(ptr, ptr[lo] + self.chunk_pairs, side="right")) - 1
                hi = min(max(hi, lo + 1), len(ptr) - 1)
                a, b = int(ptr[lo]), int(ptr[hi])
                rows = np.repeat(
                    np.arange(shard.row_start + lo, shard.row_start + hi, dtype=np.int32),
                    np.diff(ptr[lo : hi + 1]),
                )
                cols = shard.cols[a:b].astype(np.int32)
                i, j = (rows, cols) if shard.kind == UPPER else (cols, rows)
                # copies, so that a chunk the caller still holds keeps no file's bytes alive
                yield i, j, shard.topic[a:b].copy(), shard.summary[a:b].copy()
                lo = hi
            del shard, ptr

    def degrees(self) -> np.ndarray:
        """Stored pairs per row, both directions (int64)."""
        deg = np.zeros(self.n, dtype=np.int64)
        for shard in self.shards():
            deg[shard.row_start : shard.row_end] += np.diff(shard.indptr)
            deg += np.bincount(shard.cols, minlength=self.n)
            del shard
        return deg

    def row_blocks(
        self, budget_bytes: int, degrees: np.ndarray | None = None
    ) -> Iterator[RowBlock]:
        """Every row's pairs in both directions, sorted by q_t descending, a group of rows at a
        time (see ``row_groups``); one pass over the shard files per group."""
        deg = self.degrees() if degrees is None else degrees
        last = None  # the previous block's q_t, weakly
        for r0, r1 in row_groups(deg, budget_bytes):
            if last is not None and last() is not None and budget_bytes >= COLLECT_ABOVE:
                # the previous block is still alive: held by the caller, or caught in a
                # reference cycle (seen once in the tests), which a collection frees before the
                # next block is gathered. Only for large blocks: a full collection costs
                # ~0.1-1 s in a process with Dagster loaded, a gathering pass seconds.
                gc.collect()
            indptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
            np.cumsum(deg[r0:r1], out=indptr[1:])
            t_out = np.empty(indptr[-1], dtype=np.uint8)
            s_out = np.empty(indptr[-1], dtype=np.uint8)
            cur = indptr[:-1].copy()
            for shard in self.shards(below=r1):
                _scatter(
                    shard.row_start, shard.indptr, shard.cols, shard.topic, shard.summary,
                    r0, r1, indptr, cur, t_out, s_out,
                )  # fmt: skip
                del shard
            if not np.array_equal(cur, indptr[1:]):
                raise ShardError(
                    f"rows [{r0}, {r1}): the shard files changed while they were read (pair counts differ between passes)"
                )
            sort_rows_by_topic(indptr, t_out, s_out)
            last = weakref.ref(t_out)
            yield RowBlock(r0, indptr, t_out, s_out)
            # the consumer is done with this block: hold no reference to it while the next
            # group is gathered (the caller must drop its own too: ``derive_thresholds`` does)
            del indptr, t_out, s_out, cur


def row_groups(degrees: np.ndarray, budget_bytes: int) -> list[tuple[int, int]]:
    """Consecutive row ranges covering every row, each holding at most ``budget_bytes`` of
    gathered pairs and row offsets unless a single row needs more (it is then alone)."""
    cost = np.asarray(degrees, np.int64) * BYTES_PER_DIRECTION + BYTES_PER_ROW
    ends = np.cumsum(cost)
    groups: list[tuple[int, int]] = []
    r0, base, n = 0, 0, len(cost)
    while r0 < n:
        r1 = int(np.searchsorted(ends, base + budget_bytes, side="right"))
        r1 = max(r1, r0 + 1)
        groups.append((r0, r1))
        base, r0 = int(ends[r1 - 1]), r1
    return groups


@nb.njit(cache=True, nogil=True)
def _scatter(
    row_start, indptr, cols, tq, sq, r0, r1, out_ptr, cur, t_out, s_out
):  # pragma: no cover
    # a stored pair (row, col) is row's pair and col's pair: each direction whose row lies in
    # [r0, r1) goes to that row's next free slot. Every direction is counted, but none is
    # written past its row's slots: a row with more pairs than its degree promised ends with a
    # count above its end, which the caller refuses.
    for local in range(len(indptr) - 1):
        a = row_start + local
        a_in = r0 <= a < r1
        for p in range(indptr[local], indptr[local + 1]):
            b = cols[p]
            if a_in:
                x = a - r0
                if cur[x] < out_ptr[x + 1]:
                    t_out[cur[x]] = tq[p]
                    s_out[cur[x]] = sq[p]
                cur[x] += 1
            if r0 <= b < r1:
                x = b - r0
                if cur[x] < out_ptr[x + 1]:
                    t_out[cur[x]] = tq[p]
                    s_out[cur[x]] = sq[p]
                cur[x] += 1


@dataclass
class HeldPairs:
    """Every stored pair (i < j, q_t, q_s) in memory, read from ``source`` in one pass; the
    same passes as ``StoredPairs`` over it."""

    source: StoredPairs
    i: np.ndarray
    j: np.ndarray
    tq: np.ndarray
    sq: np.ndarray

    @property
    def n(self) -> int:
        return self.source.n

    @property
    def total_pairs(self) -> int:
        return len(self.i)

    def floors(self) -> tuple[int, int]:
        return self.source.floors()

    def digests(self) -> list[str]:
        return self.source.digests()

    def chunks(self) -> Iterator[Chunk]:
        step = self.source.chunk_pairs
        for a in range(0, len(self.i), step):
            yield (
                self.i[a : a + step],
                self.j[a : a + step],
                self.tq[a : a + step],
                self.sq[a : a + step],
            )

    def degrees(self) -> np.ndarray:
        return (
            np.bincount(self.i, minlength=self.n) + np.bincount(self.j, minlength=self.n)
        ).astype(np.int64)

    def row_blocks(
        self, budget_bytes: int, degrees: np.ndarray | None = None
    ) -> Iterator[RowBlock]:
        """Every row in one block: the pairs are in memory already."""
        yield RowBlock(0, *row_pairs(self.n, self.i, self.j, self.tq, self.sq))
