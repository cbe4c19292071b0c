"""Kernel inputs from the annotations: topic CSR + Lin table of used topics, summary token CSR."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.ontology.similarity import LCAIndex, lin_table
from saber_assets.outputs import write_whole
from saber_assets.signals.kernels import KernelArrays, to_csr

_TOKEN = re.compile(r"[a-z0-9^_]+")
MATH_STOP_WORDS = frozenset(
    "let assume consider given suppose find compute solve show determine value expression equation "
    "result step term method approach solution theorem lemma".split()
)


@functools.cache
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop words and ``MATH_STOP_WORDS``; imported at first use, because
    importing scikit-learn (with scipy.stats) is 2.2 s of every process's start."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | MATH_STOP_WORDS


def summary_tokens(text: str | None) -> list[str]:
    """Lower-cased ``[a-z0-9^_]+`` tokens minus English and math stop words (distinct, in order)."""
    if not text:
        return []
    stop = stop_words()
    return list(dict.fromkeys(t for t in _TOKEN.findall(text.lower()) if t not in stop))


def in_pool(require_annotations: bool = True) -> pl.Expr:
    """Whether an annotated problem is in the pools: always, or (``require_annotations``) when
    it has at least one topic and a core idea."""
    if not require_annotations:
        return pl.lit(True)
    has_idea = pl.col("summary").is_not_null() & (pl.col("summary").str.strip_chars() != "")
    return (pl.col("topics").list.len() > 0) & has_idea


def signal_pool(annotations: pl.DataFrame, require_annotations: bool = True) -> pl.DataFrame:
    """The problems the pair signals are computed over, in their order (``in_pool``). Every
    stage that reads the signals' rows reads them through this, so row n means the same problem
    in each."""
    return annotations.filter(in_pool(require_annotations))


class SignalInputError(ValueError):
    """Annotations that the kernels cannot use; the message names the problem."""


@dataclass
class SignalInputs:
    ids: list[str]
    t_ptr: np.ndarray
    t_idx: np.ndarray  # local topic ids: rows/cols of `lin`
    lin: np.ndarray  # float32 [used topics, used topics]
    used_nodes: np.ndarray  # tree node of each local topic id
    s_ptr: np.ndarray
    s_idx: np.ndarray
    vocab: list[str]
    ic_hash: str = ""  # hash of the IC values Lin was built from
    # prefix_version by n: the whole corpus's is saved with the inputs, since each of the
    # shards stage's steps asks for it (0.9 s of Python a step at 283K, 73 steps)
    # (keyed by the IC hash too: the inputs stage sets it after the arrays are made)
    versions: dict[tuple[str, int], str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def arrays(self) -> KernelArrays:
        return KernelArrays(self.t_ptr, self.t_idx, self.lin, self.s_ptr, self.s_idx)

    def prefix_version(self, n: int) -> str:
        """Hash of the first n problems' signal inputs: a shard computed on them stays valid."""
        key = (self.ic_hash, n)
        if key not in self.versions:
            self.versions[key] = self._hash_prefix(n)
        return self.versions[key]

    def _hash_prefix(self, n: int) -> str:
        h = hashlib.blake2b(digest_size=8)
        h.update(self.ic_hash.encode())
        for i in range(n):
            h.update(self.ids[i].encode())
            h.update(self.used_nodes[self.t_idx[self.t_ptr[i] : self.t_ptr[i + 1]]].tobytes())
            h.update(
                " ".join(
                    self.vocab[k] for k in self.s_idx[self.s_ptr[i] : self.s_ptr[i + 1]]
                ).encode()
            )
            h.update(b"\x1e")
        return h.hexdigest()

    def save(self, path: Path) -> None:
        ids, ids_end = packed_strings(self.ids)
        vocab, vocab_end = packed_strings(self.vocab)
        arrays = dict(
            ids=ids,
            ids_end=ids_end,
            t_ptr=self.t_ptr,
            t_idx=self.t_idx,
            lin=self.lin,
            used_nodes=self.used_nodes,
            s_ptr=self.s_ptr,
            s_idx=self.s_idx,
            vocab=vocab,
            vocab_end=vocab_end,
            ic_hash=np.array(self.ic_hash),
            version=np.array(self.prefix_version(self.n)),
        )
        write_whole(path, arrays)

    @classmethod
    def load(cls, path: Path) -> SignalInputs:
        try:  # never pickle: a planted file on a shared volume would run code in every pod
            z = np.load(path, allow_pickle=False)
            ids = unpacked_strings(z["ids"], z["ids_end"])
            vocab = unpacked_strings(z["vocab"], z["vocab_end"])
        except (ValueError, KeyError) as exc:
            raise ValueError(
                f"{path}: not saber's signal inputs ({exc}); an older saber's file, or a "
                "planted one: refused, nothing of it was run; materialise signal_inputs again"
            ) from None
        n, ic = len(z["t_ptr"]) - 1, str(z["ic_hash"])
        return cls(
            ids=ids,
            t_ptr=z["t_ptr"],
            t_idx=z["t_idx"],
            lin=z["lin"],
            used_nodes=z["used_nodes"],
            s_ptr=z["s_ptr"],
            s_idx=z["s_idx"],
            vocab=vocab,
            ic_hash=ic,
            versions={(ic, n): str(z["version"])} if "version" in z.files else {},
        )


def packed_strings(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and each one's end offset: stored without pickle."""
    encoded = [x.encode() for x in strings]
    blob = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return blob, np.cumsum([len(b) for b in encoded], dtype=np.int64)


def unpacked_strings(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    if blob.dtype != np.uint8 or ends.dtype != np.int64:
        raise ValueError(f"strings stored as {blob.dtype} / {ends.dtype}")
    data, start, out = blob.tobytes(), 0, []
    for end in ends.tolist():
        out.append(data[start:end].decode())
        start = end
    return out


def prepare_inputs(
    ids: Sequence[str],
    topics: Sequence[Sequence[int]],
    summaries: Sequence[str | None],
    ic: np.ndarray,
    parent: np.ndarray,
    depth: np.ndarray,
) -> SignalInputs:
    n_nodes = len(ic)
    for pid, ts in zip(ids, topics, strict=True):
        for t in ts:
            if not 0 <= t < n_nodes:
                raise SignalInputError(
                    f"problem {pid!r}: topic {t} is not a node of the ontology tree ({n_nodes} nodes)"
                )
            if not np.isfinite(ic[t]):
                raise SignalInputError(
                    f"problem {pid!r}: topic {t} has no information content (never annotated)"
                )
    flat = np.concatenate(
        [np.asarray(t, dtype=np.int64) for t in topics] or [np.zeros(0, np.int64)]
    )
    used, counts = np.unique(flat, return_counts=True)
    used = used[
        np.argsort(-counts, kind="stable")
    ]  # frequent topics first: cache-friendly in the kernel
    local = np.full(n_nodes, -1, dtype=np.int64)
    local[used] = np.arange(len(used))
    t_ptr, t_idx = to_csr([local[np.asarray(t, dtype=np.int64)] for t in topics])
    lin = (
        lin_table(ic, LCAIndex(parent, depth), used) if len(used) else np.zeros((1, 1), np.float32)
    )
    vocab: dict[str, int] = {}
    token_ids = [
        [vocab.setdefault(tok, len(vocab)) for tok in summary_tokens(s)] for s in summaries
    ]
    s_ptr, s_idx = to_csr(token_ids)
    return SignalInputs(list(ids), t_ptr, t_idx, lin, used, s_ptr, s_idx, list(vocab), ic_hash(ic))


def ic_hash(ic: np.ndarray) -> str:
    return hashlib.blake2b(
        np.round(np.asarray(ic, dtype=np.float64), 9).tobytes(), digest_size=8
    ).hexdigest()
