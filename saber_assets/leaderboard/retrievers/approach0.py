"""Approach Zero through pya0.

One index over all documents of a setting (built on tmpfs once per process and document set),
searched once per query: that one search gives the full-corpus track and, with
``candidates: corpus`` (the default), the candidates' scores too — their scores in the corpus
index. The difference from an index over the query's candidates alone (``candidates: own-index``,
the earlier behaviour, one index per query): the engine's text-term weights use the statistics
of the whole document set rather than of the candidates, so candidate scores, and occasionally
their order, differ; formula matching is per document pair either way. Queries are searched by
``workers`` processes at once (the engine is single-threaded C).

pya0's own returned ids are unreliable (off by one or two), so each document carries our id in
the ``url`` field. Formulas go to the engine as [imath] spans; a document the engine does not
return scores 0. An engine failure raises ``RetrieverFailed``: the query is counted as failed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np

from .base import RetrieverFailed
from .tokenize import LATEX_SPAN, plain_tokens, quiet_c_output, split_math


def _tmp_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


# Full-corpus indexes outlive one retriever object: every domain partition of a run in the same
# process reuses them (key: the document texts).
_CORPUS_INDEXES: dict[tuple, str] = {}


def to_engine_text(text: str) -> str:
    return LATEX_SPAN.sub(
        lambda m: f" [imath]{next(g for g in m.groups() if g is not None).strip()}[/imath] ", text
    )


class Approach0Retriever:
    def __init__(
        self,
        name: str = "approach0",
        max_terms: int = 12,
        max_formulas: int = 6,
        candidates: str = "corpus",
        workers: int = 2,
    ) -> None:
        if candidates not in ("corpus", "own-index"):
            raise ValueError("candidates must be 'corpus' or 'own-index'")
        self.name = name
        self.max_terms = max_terms
        self.max_formulas = max_formulas
        self.candidates_from_corpus = candidates == "corpus"
        self.workers = workers

    def query_keywords(self, query: str) -> list[dict]:
        prose, formulas = split_math(query)
        terms = list(dict.fromkeys(t for t in plain_tokens(prose) if len(t) > 2))[: self.max_terms]
        kws = [{"type": "tex", "str": f} for f in formulas[: self.max_formulas]]
        kws += [{"type": "term", "str": t} for t in terms]
        return kws

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        return self._search(query, docs, keep=False)

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        """Scores of every document (the index over all documents is built once per process and
        kept; the engine ranks every document it matches, the rest score 0)."""
        return self._search(query, all_docs, keep=True)

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> list:
        """``corpus_scores`` of many queries, searched by ``workers`` processes at once; a query
        the engine fails on gives its ``RetrieverFailed`` in place of its scores."""
        if not queries:
            return []
        self._index(all_docs, keep=True)  # built before the workers fork: they share it
        if self.workers <= 1 or len(queries) < 2:
            return [_search_one(q, self, all_docs) for q in queries]
        import multiprocessing as mp

        global _BATCH
        _BATCH = (self, all_docs)
        try:
            with mp.get_context("fork").Pool(self.workers) as pool:
                results = pool.map(
                    _search_one, queries, chunksize=max(1, len(queries) // (4 * self.workers))
                )
        finally:
            _BATCH = None
        return results

    def _search(self, query: str, docs: list[str], keep: bool) -> np.ndarray:
        with quiet_c_output():
            return self._search_loud(query, docs, keep)

    def _index(self, docs: list[str], keep: bool) -> str:
        """Path of an index over ``docs``: the kept one for this document set, or a new one."""
        import pya0

        key = (len(docs), hash(tuple(docs)))
        if keep and key in _CORPUS_INDEXES:
            return _CORPUS_INDEXES[key]
        tmp = tempfile.mkdtemp(prefix="a0-", dir=_tmp_root())
        ix_path = os.path.join(tmp, "ix")
        with quiet_c_output():
            ix = pya0.index_open(ix_path, option="w")
            if ix is None:
                shutil.rmtree(tmp, ignore_errors=True)
                raise RetrieverFailed("cannot open an Approach Zero index")
            writer = pya0.index_writer(ix)
            for i, d in enumerate(docs):
                pya0.writer_add_doc(writer, content=to_engine_text(d), url=str(i))
            pya0.writer_flush(writer)
            pya0.writer_close(writer)
            pya0.index_close(ix)
        if keep:
            _CORPUS_INDEXES[key] = ix_path
        return ix_path

    def _search_loud(self, query: str, docs: list[str], keep: bool) -> np.ndarray:
        import pya0

        kws = self.query_keywords(query)
        if not kws:
            raise RetrieverFailed("query has neither formulas nor terms")
        ix_path = None
        try:
            ix_path = self._index(docs, keep)
            ix = pya0.index_open(ix_path, option="r")
            try:
                res = json.loads(pya0.search(ix, kws, verbose=False, topk=len(docs)))
            finally:
                pya0.index_close(ix)
        except RetrieverFailed:
            raise
        except Exception as exc:
            raise RetrieverFailed(f"Approach Zero failed: {exc}") from None
        finally:
            if not keep and ix_path:
                shutil.rmtree(os.path.dirname(ix_path), ignore_errors=True)
        if res.get("ret_code") != 0:
            raise RetrieverFailed(f"Approach Zero: {res.get('ret_str')}")
        scores = np.zeros(len(docs))
        for hit in res.get("hits", []):
            url = hit.get("field_url", "")
            if url.isdigit() and int(url) < len(docs):
                scores[int(url)] = max(scores[int(url)], float(hit["score"]))
        return scores


_BATCH: tuple | None = None  # (retriever, documents) inherited by forked search workers


def _search_one(query: str, retriever=None, docs=None):
    if retriever is None:
        retriever, docs = _BATCH
    try:
        return retriever.corpus_scores(query, docs)
    except RetrieverFailed as exc:
        return exc
