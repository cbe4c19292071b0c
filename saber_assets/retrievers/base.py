"""The retriever interface: what every kind answers (``score``), how it fails, and a document set's
in-memory identity. The settings and their texts are the benchmark's (``benchmark/texts.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

_last_key: list = [None, None]  # the list last keyed, and its key


def docs_key(docs: list[str]) -> tuple[int, int]:
    """In-memory identity of a document set (which fitted or loaded corpus state, or which
    index, belongs to which documents).

    Asked once per query with the same list, so the last list's key is kept: hashing 283K texts
    took 37 ms, as long as scoring the query. Document lists are never changed in place."""
    if _last_key[0] is docs and _last_key[1][0] == len(docs):
        return _last_key[1]
    key = (len(docs), hash(tuple(docs)))
    _last_key[:] = [docs, key]
    return key


_DIGESTS: dict[int, tuple[list[str], bytes]] = {}  # id(list) -> (the list, its digest)


def texts_digest(docs: list[str]) -> bytes:
    """A digest of every text, in order (each one's length, then its bytes). Kept for the last
    few lists (held, so their ids stay theirs): a benchmark's document texts are one list per
    side for as long as it is read (``Benchmark.read_kept``), and hashing 283K full texts took
    0.6 s a setting of every run. Lists are never changed in place."""
    kept = _DIGESTS.get(id(docs))
    if kept is not None and kept[0] is docs:
        return kept[1]
    digest = framed_digest(docs)
    if len(_DIGESTS) >= 4:
        _DIGESTS.pop(next(iter(_DIGESTS)))
    _DIGESTS[id(docs)] = (docs, digest)
    return digest


def framed_digest(texts: Iterable[str]) -> bytes:
    """blake2b-128 of the texts in order, each as its byte length then its bytes."""
    h = hashlib.blake2b(digest_size=16)
    for text in texts:
        b = text.encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


def scores_key(query: str, docs: Sequence[str]) -> bytes:
    """Content key of one scoring request: the query's text and its documents' texts, in order
    (where a retriever's saved scores for the same request are found again)."""
    return framed_digest((query, *docs))


class Retriever(Protocol):
    name: str

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        """One score per document (higher = more relevant)."""
        ...


@dataclass(frozen=True)
class Kind:
    """What a retriever kind says of itself, in its own module (``KINDS`` there); the registry
    collects them and no other module branches on a kind's name.

    ``make`` is the class: its signature is the parameters an entry may give. What the platform
    hands it: the embedding cache (``embeds``), the pointwise judge and a translator
    (``judges``), the retrievers it fuses, built from the entries named in ``params.retrievers``
    (``fuses``). ``model_of(entry)``: (model id, revision, backend) for provenance, from the entry
    alone (default: the kind's own name); ``models(entry, llm_model)``: the neural models it
    relies on; ``unavailable(entry)``: why it cannot run here (a package, a GPU, an API key), or
    None."""

    name: str
    make: Callable[..., Any]
    embeds: bool = False
    judges: bool = False
    fuses: bool = False
    model_of: Callable[[Any], tuple[str, str | None, str]] | None = None
    models: Callable[[Any, str], set[str]] | None = None
    unavailable: Callable[[Any], str | None] | None = None


class RetrieverFailed(RuntimeError):
    """The retriever could not score this query; it is counted, never silently dropped."""


# how a skipped query's error begins, wherever the error travels as text (a run file's `error`)
SKIPPED = "skipped: "


class RetrieverSkipped(RetrieverFailed):
    """The retriever leaves this query out by its own rule (the reference's Approach Zero skips
    the queries its engine crashes on): left out of its means, counted as skipped on the board."""

    def __init__(self, reason: str) -> None:
        super().__init__(SKIPPED + reason)
