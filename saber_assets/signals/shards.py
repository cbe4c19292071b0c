"""Byte-packed shard files of the pair signals (one file per row block).

Layout (little-endian):
    header  (fixed size, see HEADER): magic b"SABERSIG", format version, kind, N, row range, floors,
            quantisation scale, histogram bins, number of pairs, corpus version (16 ASCII bytes),
            BLAKE2b-128 checksum of the payload
    payload indptr   int64[rows + 1]   CSR over the block's rows (pairs j > i of row i)
            cols     int32[pairs]      kind 0 ("upper"): row i's pairs with i < j < N;
                                       kind 1 ("lower", appended rows): row j's pairs with i < j
            topic    uint8[pairs]      q = round(255 · value)
            summary  uint8[pairs]
            hist     uint32[rows, bins, bins]   every pair (i, j > i), by coarse bins of both signals

Readers check magic, version, sizes and checksum, and refuse a file from another corpus version.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saber_assets.outputs import written_whole

MAGIC = b"SABERSIG"
FORMAT_VERSION = 1
# magic, version, kind, N, row_start, row_end, floor_t, floor_s, scale, bins, pairs, corpus_version, checksum
HEADER = struct.Struct("<8sHBQQQBBHHQ16s16s")
UPPER, LOWER = 0, 1
BYTES_PER_PAIR = 4 + 1 + 1


class ShardError(ValueError):
    """A shard file is truncated, corrupted, foreign or from another corpus version."""


@dataclass
class Shard:
    kind: int
    n: int
    row_start: int
    row_end: int
    floor_topic: int
    floor_summary: int
    scale: int
    corpus_version: str
    indptr: np.ndarray
    cols: np.ndarray
    topic: np.ndarray
    summary: np.ndarray
    hist: np.ndarray

    @property
    def n_pairs(self) -> int:
        return int(self.cols.shape[0])

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(smaller index, larger index) of every stored unordered pair."""
        rows = self.rows()
        cols = self.cols.astype(np.int64)
        return (rows, cols) if self.kind == UPPER else (cols, rows)

    def rows(self) -> np.ndarray:
        """The global row index of every stored pair."""
        return np.repeat(
            np.arange(self.row_start, self.row_end, dtype=np.int64), np.diff(self.indptr)
        )


def _payload(shard: Shard) -> list[bytes]:
    return [
        np.ascontiguousarray(shard.indptr, dtype="<i8").tobytes(),
        np.ascontiguousarray(shard.cols, dtype="<i4").tobytes(),
        np.ascontiguousarray(shard.topic, dtype=np.uint8).tobytes(),
        np.ascontiguousarray(shard.summary, dtype=np.uint8).tobytes(),
        np.ascontiguousarray(shard.hist, dtype="<u4").tobytes(),
    ]


def write_shard(path: Path, shard: Shard) -> int:
    """Write atomically (temp file + rename); returns the file size in bytes."""
    if len(shard.corpus_version) > 16:
        raise ValueError("corpus version must be at most 16 characters")
    parts = _payload(shard)
    digest = hashlib.blake2b(digest_size=16)
    for p in parts:
        digest.update(p)
    header = HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        shard.kind,
        shard.n,
        shard.row_start,
        shard.row_end,
        shard.floor_topic,
        shard.floor_summary,
        shard.scale,
        shard.hist.shape[1],
        shard.n_pairs,
        shard.corpus_version.encode().ljust(16, b"\0"),
        digest.digest(),
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_whole(path) as tmp, open(tmp, "wb") as f:
        f.write(header)
        for p in parts:
            f.write(p)
    return path.stat().st_size


def read_header(path: Path) -> dict:
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(HEADER.size)
    if len(raw) < HEADER.size:
        raise ShardError(f"{path}: truncated shard (header is {len(raw)} of {HEADER.size} bytes)")
    magic, version, kind, n, r0, r1, ft, fs, scale, bins, pairs, corpus, checksum = HEADER.unpack(
        raw
    )
    if magic != MAGIC:
        raise ShardError(f"{path}: not a saber signal shard (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise ShardError(
            f"{path}: shard format version {version}, this code reads version {FORMAT_VERSION}"
        )
    return {
        "kind": kind,
        "n": n,
        "row_start": r0,
        "row_end": r1,
        "floor_topic": ft,
        "floor_summary": fs,
        "scale": scale,
        "bins": bins,
        "pairs": pairs,
        "corpus_version": corpus.rstrip(b"\0").decode(),
        "checksum": checksum,
    }


def read_shard(
    path: Path, expect_corpus_version: str | None = None, with_hist: bool = True
) -> Shard:
    path = Path(path)
    h = read_header(path)
    if expect_corpus_version is not None and h["corpus_version"] != expect_corpus_version:
        raise ShardError(
            f"{path}: shard of corpus version {h['corpus_version']!r}, expected {expect_corpus_version!r}: recompute it"
        )
    rows, pairs, bins = h["row_end"] - h["row_start"], h["pairs"], h["bins"]
    sizes = [8 * (rows + 1), 4 * pairs, pairs, pairs, 4 * rows * bins * bins]
    expected = HEADER.size + sum(sizes)
    actual = path.stat().st_size
    if actual != expected:
        raise ShardError(
            f"{path}: truncated or padded shard: {actual} bytes, header promises {expected}"
        )
    data = memoryview(path.read_bytes())[HEADER.size :]  # a view: no second copy of the file
    if hashlib.blake2b(data, digest_size=16).digest() != h["checksum"]:
        raise ShardError(f"{path}: checksum mismatch: the shard is corrupted")
    offs = np.cumsum([0, *sizes])
    arr = [data[offs[k] : offs[k + 1]] for k in range(5)]
    indptr = np.frombuffer(arr[0], dtype="<i8")
    if indptr[0] != 0 or indptr[-1] != pairs or np.any(np.diff(indptr) < 0):
        raise ShardError(f"{path}: inconsistent row index")
    return Shard(
        kind=h["kind"],
        n=h["n"],
        row_start=h["row_start"],
        row_end=h["row_end"],
        floor_topic=h["floor_topic"],
        floor_summary=h["floor_summary"],
        scale=h["scale"],
        corpus_version=h["corpus_version"],
        indptr=indptr,
        cols=np.frombuffer(arr[1], dtype="<i4"),
        topic=np.frombuffer(arr[2], dtype=np.uint8),
        summary=np.frombuffer(arr[3], dtype=np.uint8),
        hist=np.frombuffer(arr[4], dtype="<u4").reshape(rows, bins, bins)
        if with_hist
        else np.zeros((0, bins, bins), np.uint32),
    )
