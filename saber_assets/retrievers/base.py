"""The retriever interface: what every kind answers (``score``), how it fails, and a document set's
in-memory identity. The settings and their texts are the benchmark's (``benchmark/texts.py``)."""

from __future__ import annotations

from typing import Protocol

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


class Retriever(Protocol):
    name: str

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        """One score per document (higher = more relevant)."""
        ...


class RetrieverFailed(RuntimeError):
    """The retriever could not score this query; it is counted, never silently dropped."""
