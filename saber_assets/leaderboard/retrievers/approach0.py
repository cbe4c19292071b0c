"""Approach Zero through pya0: a per-query index over the candidates (on tmpfs), then one search.

pya0's own returned ids are unreliable (off by one or two), so each document carries our id in
the ``url`` field. Formulas go to the engine as [imath] spans; a candidate the engine does not
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
    def __init__(self, name: str = "approach0", max_terms: int = 12, max_formulas: int = 6) -> None:
        self.name = name
        self.max_terms = max_terms
        self.max_formulas = max_formulas

    def query_keywords(self, query: str) -> list[dict]:
        prose, formulas = split_math(query)
        terms = list(dict.fromkeys(t for t in plain_tokens(prose) if len(t) > 2))[: self.max_terms]
        kws = [{"type": "tex", "str": f} for f in formulas[: self.max_formulas]]
        kws += [{"type": "term", "str": t} for t in terms]
        return kws

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        return self._search(query, docs, keep=False)

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        """Full-corpus track: the index over all documents is built once per process and kept;
        the engine returns its top 1000 (the rest score 0)."""
        return self._search(query, all_docs, keep=True)

    def _search(self, query: str, docs: list[str], keep: bool) -> np.ndarray:
        with quiet_c_output():
            return self._search_loud(query, docs, keep)

    def _search_loud(self, query: str, docs: list[str], keep: bool) -> np.ndarray:
        import pya0

        kws = self.query_keywords(query)
        if not kws:
            raise RetrieverFailed("query has neither formulas nor terms")
        key = (len(docs), hash(tuple(docs)))
        ix_path = None
        try:
            if keep and key in _CORPUS_INDEXES:
                ix_path = _CORPUS_INDEXES[key]
            else:
                tmp = tempfile.mkdtemp(prefix="a0-", dir=_tmp_root())
                ix_path = os.path.join(tmp, "ix")
                ix = pya0.index_open(ix_path, option="w")
                if ix is None:
                    raise RetrieverFailed("cannot open an Approach Zero index")
                writer = pya0.index_writer(ix)
                for i, d in enumerate(docs):
                    pya0.writer_add_doc(writer, content=to_engine_text(d), url=str(i))
                pya0.writer_flush(writer)
                pya0.writer_close(writer)
                pya0.index_close(ix)
                if keep:
                    _CORPUS_INDEXES[key] = ix_path
            ix = pya0.index_open(ix_path, option="r")
            try:
                res = json.loads(pya0.search(ix, kws, verbose=False, topk=min(len(docs), 1000)))
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
