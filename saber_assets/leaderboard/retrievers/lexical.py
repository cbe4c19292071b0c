"""Lexical baselines: BM25 (bm25s), TF-IDF (scikit-learn), Jaccard; math-aware or plain tokens.

BM25 is bm25s' "lucene" variant (k1 = 1.5, b = 0.75 by default). By default the IDF is computed
over the query's candidates, as the paper does; ``idf: corpus`` fits it on the whole document set
once (``fit_corpus``) and then scores the candidates.
"""

from __future__ import annotations

import numpy as np

from .tokenize import TOKENIZERS


class _Lexical:
    def __init__(self, name: str, tokenizer: str = "math") -> None:
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {tokenizer!r} (one of {sorted(TOKENIZERS)})")
        self.name = name
        self._tokenize = TOKENIZERS[tokenizer]
        self._cache: dict[str, list[str]] = {}  # a document is a candidate of many queries

    def tok(self, text: str) -> list[str]:
        toks = self._cache.get(text)
        if toks is None:
            toks = self._cache[text] = self._tokenize(text)
        return toks

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        """Scores over the whole document set (full-corpus track)."""
        return self.score(query, all_docs)


class BM25Retriever(_Lexical):
    def __init__(
        self,
        name: str,
        tokenizer: str = "math",
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        idf: str = "candidates",
    ) -> None:
        super().__init__(name, tokenizer)
        if idf not in ("candidates", "corpus"):
            raise ValueError("idf must be 'candidates' or 'corpus'")
        self.k1, self.b, self.method, self.idf = k1, b, method, idf
        self._corpus = None  # (bm25 index, text -> row) when idf is over the corpus
        # IDF over the corpus: a candidate's score is its corpus score, one search serves both
        self.candidates_from_corpus = idf == "corpus"

    def _index(self, docs_tokens):
        import bm25s

        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        # bm25s cannot index an empty document list entry: give empty docs a placeholder token
        index.index([t or ["\x00"] for t in docs_tokens], show_progress=False)
        return index

    def fit_corpus(self, all_docs: list[str]) -> None:
        if self.idf == "corpus":
            self._corpus = (
                self._index([self.tok(d) for d in all_docs]),
                {d: i for i, d in enumerate(all_docs)},
            )

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        key = (len(all_docs), hash(tuple(all_docs)))
        if getattr(self, "_full", (None,))[0] != key:
            self._full = (key, self._index([self.tok(d) for d in all_docs]))
        return np.asarray(self._full[1].get_scores(self.tok(query) or ["\x01"]), dtype=np.float64)

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        q = self.tok(query) or ["\x01"]
        if self._corpus is not None:
            index, row = self._corpus
            scores = index.get_scores(q)
            return np.array([scores[row[d]] for d in docs], dtype=np.float64)
        return np.asarray(self._index([self.tok(d) for d in docs]).get_scores(q), dtype=np.float64)


class TfidfRetriever(_Lexical):
    """TF-IDF cosine (scikit-learn, sublinear tf). The full-corpus track fits the vectorizer on
    every document once and scores a batch of queries with one sparse product (each entry is the
    same sum as one query's product, so the scores are identical)."""

    def _fit(self, all_docs: list[str]):
        from sklearn.feature_extraction.text import TfidfVectorizer

        key = (len(all_docs), hash(tuple(all_docs)))
        if getattr(self, "_fitted", (None,))[0] != key:
            vec = TfidfVectorizer(analyzer=self.tok, sublinear_tf=True)
            self._fitted = (key, vec, vec.fit_transform(all_docs))
        return self._fitted[1], self._fitted[2]

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        vec, matrix = self._fit(all_docs)
        return np.asarray((matrix @ vec.transform([query]).T).toarray()).ravel()

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> np.ndarray:
        vec, matrix = self._fit(all_docs)
        return np.asarray((matrix @ vec.transform(queries).T).toarray()).T

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(analyzer=self.tok, sublinear_tf=True)
        try:
            d = vec.fit_transform(docs)
        except ValueError:  # every document empty
            return np.zeros(len(docs))
        qv = vec.transform([query])
        return np.asarray((d @ qv.T).toarray()).ravel()


class JaccardRetriever(_Lexical):
    """|q ∩ d| / |q ∪ d| over token sets. A document's score does not depend on the other
    documents, so candidates take their corpus scores, and many queries are scored at once with
    one sparse product over token-id sets (the same integers, the same division)."""

    candidates_from_corpus = True

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        q = set(self.tok(query))
        out = np.zeros(len(docs))
        for i, d in enumerate(docs):
            t = set(self.tok(d))
            u = len(q | t)
            out[i] = len(q & t) / u if u else 0.0
        return out

    def _sets(self, texts: list[str], vocab: dict[str, int], grow: bool):
        """Binary CSR of the texts' token sets over ``vocab`` (grown for documents; a query's
        unseen tokens count in its set size only), and the set sizes."""
        from scipy.sparse import csr_matrix

        indptr, indices, sizes = [0], [], []
        for t in texts:
            toks = set(self.tok(t))
            sizes.append(len(toks))
            ids = []
            for tok in toks:
                k = vocab.get(tok)
                if k is None and grow:
                    k = vocab[tok] = len(vocab)
                if k is not None:
                    ids.append(k)
            indices.extend(sorted(ids))
            indptr.append(len(indices))
        m = csr_matrix(
            (np.ones(len(indices), dtype=np.int64), np.array(indices, dtype=np.int64), indptr),
            shape=(len(texts), max(len(vocab), 1)),
        )
        return m, np.array(sizes, dtype=np.int64)

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> np.ndarray:
        key = (len(all_docs), hash(tuple(all_docs)))
        if getattr(self, "_docs", (None,))[0] != key:
            vocab: dict[str, int] = {}
            d, d_sizes = self._sets(all_docs, vocab, grow=True)
            self._docs = (key, vocab, d.T.tocsr(), d_sizes)
        _, vocab, d_t, d_sizes = self._docs
        q, q_sizes = self._sets(queries, vocab, grow=False)
        q.resize((len(queries), d_t.shape[0]))
        inter = np.asarray((q @ d_t).toarray(), dtype=np.float64)
        union = q_sizes[:, None] + d_sizes[None, :] - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(union > 0, inter / union, 0.0)
