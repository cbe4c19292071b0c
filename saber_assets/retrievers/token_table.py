"""A document set's tokens under one tokenizer, kept once for every retriever that uses it.

Tokenising is most of a lexical index's own cost (283K full texts: ~30 s with the math-aware
tokenizer, then ~7 s to share one string per token, ~15 s to store them as a Parquet list
column), and every retriever paid it again for the same texts: bm25, bm25-corpus-idf, tfidf
and jaccard all read the math-aware tokens. A ``TokenTable`` is the tokens as ids into a
vocabulary (int32 ids and int64 offsets, NumPy files read memory-mapped; the vocabulary in
first-seen order), written once per tokenizer and document set under the indexes'
``.tokens`` folder (``shared_tokens``) and read by every index of that tokenizer. The
tokens it gives back are exactly the tokenizer's, each distinct token one string object.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

TOKENS_FORMAT = 1
TOKENS_FILE = "tokens.json"  # in an index folder: which token table holds its documents' tokens


class TokenTable:
    """Row r's tokens are ``vocab[ids[offsets[r]:offsets[r + 1]]]``."""

    def __init__(self, vocab: Sequence[str], ids: np.ndarray, offsets: np.ndarray) -> None:
        if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(ids):
            raise ValueError(f"token offsets {offsets[:1]}…{offsets[-1:]} for {len(ids)} ids")
        self.vocab = np.empty(len(vocab), dtype=object)  # one string object per distinct token
        self.vocab[:] = list(vocab)
        self.ids = ids
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def of(
        cls, tokenize: Callable[[str], list[str]], texts: Sequence[str], chunk: int = 8192
    ) -> TokenTable:
        """The texts' tokens, a chunk of texts at a time: only one chunk's token strings are
        ever Python objects (283K full texts at once: ~3 GB of them)."""
        vocab: dict[str, int] = {}
        ids, lengths = [], []
        for c0 in range(0, len(texts), chunk):
            raw = [tokenize(t) for t in texts[c0 : c0 + chunk]]
            lengths.append(np.fromiter(map(len, raw), dtype=np.int64, count=len(raw)))
            encoded = pa.array(list(chain.from_iterable(raw)), type=pa.large_string())
            encoded = encoded.dictionary_encode()  # the chunk's tokens, first seen first
            words = encoded.dictionary.to_pylist()
            to_global = np.array([vocab.setdefault(w, len(vocab)) for w in words], np.int32)
            local = encoded.indices.to_numpy(zero_copy_only=False)
            ids.append(to_global[local] if len(words) else np.zeros(0, np.int32))
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        if lengths:
            np.cumsum(np.concatenate(lengths), out=offsets[1:])
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int32)
        return cls(list(vocab), flat.astype(np.int32, copy=False), offsets)

    def tokens(self, row: int) -> list[str]:
        return self.vocab[self.ids[self.offsets[row] : self.offsets[row + 1]]].tolist()

    def series(self, rows: Sequence[int]) -> pl.Series:
        """The rows' tokens as one list column."""
        rows = np.asarray(rows, dtype=np.int64)
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        lengths = ends - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        take = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        values = pa.array(self.vocab[self.ids[take]].tolist(), type=pa.large_string())
        column = pa.LargeListArray.from_arrays(pa.array(offsets), values)
        return pl.Series("tokens", column).cast(pl.List(pl.String))

    def save(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / "ids.npy", self.ids)
        np.save(path / "offsets.npy", self.offsets)
        pl.DataFrame({"token": self.vocab.tolist()}, schema={"token": pl.String}).write_parquet(
            path / "vocabulary.parquet"
        )

    @classmethod
    def load(cls, path: Path) -> TokenTable:
        vocab = pl.read_parquet(path / "vocabulary.parquet")["token"].to_list()
        ids = np.load(path / "ids.npy", mmap_mode="r")
        offsets = np.load(path / "offsets.npy")
        if len(ids) and int(ids.max(initial=0)) >= len(vocab):
            raise ValueError(f"{path}: token ids past the vocabulary of {len(vocab)}")
        return cls(vocab, ids, offsets)


def tokens_key(tokenizer: str, digest: bytes) -> str:
    """Content key of a token table: its format, the tokenizer's name, the texts' digest."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{TOKENS_FORMAT}|{tokenizer}|".encode())
    h.update(digest)
    return h.hexdigest()


def shared_tokens(
    root: Path,
    tokenizer: str,
    tokenize: Callable[[str], list[str]],
    texts: Sequence[str],
    digest: bytes,
) -> tuple[TokenTable, Path]:
    """The texts' token table under ``root`` (``digest``: the texts', ``indexes.texts_digest``):
    read where a retriever of the same tokenizer already wrote it, else made and written (to a
    scratch folder moved into place: a process killed halfway leaves none, and two writing at
    once both leave a whole one). Returns the table and its folder."""
    path = root / f"{tokenizer}-{tokens_key(tokenizer, digest)}"
    if path.is_dir():
        try:
            table = TokenTable.load(path)
            if len(table) == len(texts):
                return table, path
        except (OSError, ValueError):
            pass  # unreadable: made again below
    table = TokenTable.of(tokenize, texts)
    scratch = root / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        table.save(scratch)
        if path.exists():
            shutil.rmtree(path, ignore_errors=True)
        try:
            scratch.rename(path)
        except OSError:  # another process moved its own whole table into place first
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return table, path


def prune_token_tables(root: Path, indexes: Path, older_than_s: float = 3600.0) -> list[str]:
    """Remove the token tables under ``root`` that no index under ``indexes`` names (an earlier
    corpus's: an index used to take its tokens with it when it was replaced) and that were
    written more than ``older_than_s`` ago: a build in another process may have just written
    one its index does not name yet. Returns the removed tables' names."""
    if not root.is_dir():
        return []
    named = set()
    for f in indexes.glob(f"*/*/{TOKENS_FILE}"):
        try:
            named.add(json.loads(f.read_text()).get("shared"))
        except (OSError, ValueError):
            continue  # an index being written or broken: its table is kept this time
    cutoff = time.time() - older_than_s
    gone = []
    for table in sorted(root.iterdir()):
        if table.name.startswith(".") or table.name in named:
            continue
        if table.stat().st_mtime < cutoff:
            shutil.rmtree(table, ignore_errors=True)
            gone.append(table.name)
    return gone
