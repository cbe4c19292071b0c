"""The retriever interface: what every kind answers (``score``), how it fails, and a document set's
in-memory identity. The settings and their texts are the benchmark's (``benchmark/texts.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
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


def scores_key(query: str, docs: Sequence[str]) -> bytes:
    """Content key of one scoring request: the query's text and its documents' texts, in order
    (where a retriever's saved scores for the same request are found again)."""
    h = hashlib.blake2b(digest_size=16)
    for text in (query, *docs):
        b = text.encode()
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.digest()


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
