"""The retriever interface, the three settings, and the texts each setting shows."""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

Setting = Literal["statement-statement", "statement-full", "full-full"]
SETTINGS: tuple[Setting, ...] = ("statement-statement", "statement-full", "full-full")


def full_text(problem: str, solution: str) -> str:
    return f"Problem: {problem}\n\nSolution: {solution}"


def _check(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"unknown setting {setting!r} (settings: {', '.join(SETTINGS)})")


def document_side(setting: str) -> str:
    """What a setting shows of a document: "statement", or "full" (statement and solution).
    statement→full and full→full show the same documents, so they share one index."""
    _check(setting)
    return "statement" if setting == "statement-statement" else "full"


def setting_texts(setting: str, problem: str, solution: str, as_query: bool) -> str:
    """statement→statement, statement→full (query statement, documents with solutions), full→full."""
    # a document's side is document_side's answer, so texts and shared indexes cannot drift apart
    use_full = setting == "full-full" if as_query else document_side(setting) == "full"
    _check(setting)
    return full_text(problem, solution) if use_full else problem


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
