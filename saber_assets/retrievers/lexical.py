"""Lexical baselines: BM25 (bm25s), TF-IDF (scikit-learn), Jaccard; math-aware or plain tokens.

BM25 is bm25s' "lucene" variant (k1 = 1.5, b = 0.75 by default), or with ``method: rank_bm25``
rank_bm25's ``BM25Okapi`` (IDF log((N − df + 0.5)/(df + 0.5)), a negative IDF replaced by
ε × the mean IDF, ε = 0.25): the reference code's BM25, which bm25s has no variant for. By
default the IDF is computed over the query's candidates, as the paper does; ``idf: corpus`` fits
it on the whole document set once (``fit_corpus``) and then scores the candidates. TF-IDF is
scikit-learn's, with sublinear tf by default; ``sublinear_tf: false`` is the library's default
(the reference code's).

Each retriever's document-side work — tokens, and its corpus structure (the bm25s index, the
TF-IDF vocabulary, IDF and matrix, the Jaccard token-id sets) — is written once by
``build_index`` and read back by ``load_index`` (``retrievers.indexes``); the loaded state is
exactly what ``fit_corpus`` would compute, so the scores are identical. The tokens are a token
table (``token_table``) made once per tokenizer and document set and shared by every retriever
of that tokenizer.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.retrievers.base import Kind, docs_key, texts_digest
from saber_assets.retrievers.token_table import TOKENS_FILE, TokenTable, shared_tokens
from saber_assets.retrievers.tokenize import TOKENIZERS


class StoredTokens:
    """The tokens of an index's documents, looked up by text, from their token table
    (``token_table``: ids into a vocabulary, no Python object per token)."""

    def __init__(self, docs: list[str], table: TokenTable) -> None:
        if len(table) != len(docs):
            raise ValueError(f"{len(table)} token lists for {len(docs)} documents")
        self.row_of = {d: i for i, d in enumerate(docs)}
        self.table = table

    @classmethod
    def read(cls, docs: list[str], path: Path, shared: Path | None) -> StoredTokens:
        """The table an index folder names: its own, or one in the ``shared`` folder."""
        where = json.loads((path / TOKENS_FILE).read_text())
        if "shared" in where:
            if shared is None:
                raise ValueError(f"{path}: its tokens are shared, and no shared folder is given")
            return cls(docs, TokenTable.load(shared / where["shared"]))
        return cls(docs, TokenTable.load(path / where["own"]))

    def get(self, text: str) -> list[str] | None:
        row = self.row_of.get(text)
        return None if row is None else self.table.tokens(row)

    def series(self, docs: list[str]) -> pl.Series | None:
        """The documents' tokens as one column, or None when one of them is not stored."""
        rows = [self.row_of.get(d) for d in docs]
        if None in rows:
            return None
        return self.table.series(rows)


class _Lexical:
    def __init__(self, name: str, tokenizer: str = "math") -> None:
        if tokenizer not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {tokenizer!r} (one of {sorted(TOKENIZERS)})")
        self.name = name
        self.tokenizer = tokenizer
        self._tokenize = TOKENIZERS[tokenizer]
        # texts outside the index (queries, other documents): a document is a candidate of many
        # queries. The index's own documents are read from its stored tokens instead, which
        # are replaced, not accumulated, when another setting's index is built or read.
        self._cache: dict[str, list[str]] = {}
        self._stored: StoredTokens | None = None
        # where token tables shared with the other retrievers of this tokenizer lie
        # (``indexes.ensure_index`` says); None: each index keeps its own
        self.tokens_dir: Path | None = None

    def tok(self, text: str) -> list[str]:
        toks = self._cache.get(text)
        if toks is None and self._stored is not None:
            toks = self._stored.get(text)
        if toks is None:
            toks = self._cache[text] = self._tokenize(text)
        return toks

    def token_series(self, docs: list[str]) -> pl.Series:
        """The documents' tokens as one list column (gathered from the index when it holds them)."""
        stored = self._stored.series(docs) if self._stored is not None else None
        if stored is not None:
            return stored
        return pl.Series([self.tok(d) for d in docs], dtype=pl.List(pl.String))

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        """Scores over the whole document set (full-corpus track)."""
        return self.score(query, all_docs)

    def build_index(self, docs: list[str], path: Path) -> None:
        """Name the documents' token table (made once per tokenizer and document set where a
        shared folder is given) and write the corpus structure under ``path``."""
        path.mkdir(parents=True, exist_ok=True)
        self._stored = None  # the previous setting's tokens are not needed while this one builds
        if self.tokens_dir is not None:
            table, where = shared_tokens(
                self.tokens_dir, self.tokenizer, self._tokenize, docs, texts_digest(docs)
            )
            (path / TOKENS_FILE).write_text(json.dumps({"shared": where.name}))
        else:
            table = TokenTable.of(self._tokenize, docs)
            table.save(path / "tokens")
            (path / TOKENS_FILE).write_text(json.dumps({"own": "tokens"}))
        self._stored = StoredTokens(docs, table)
        self._save_corpus(docs, path)

    def load_index(self, docs: list[str], path: Path) -> None:
        self._stored = None  # freed before the next table is read, not after
        self._stored = StoredTokens.read(docs, path, self.tokens_dir)
        self._load_corpus(docs, path)

    def _term_counts(self, all_docs: list[str]):
        """The documents' term counts (CSR, documents x terms in sorted order; within a row the
        terms in the order they first occur in the document) and token counts, for the
        retrievers whose statistics are over a query's candidates: given every candidate of a
        run (``fit_candidates``), a query's candidates are rows of it, so nothing is refitted per
        query; a document outside it sends its query to the per-query fit."""
        from scipy.sparse import csr_matrix

        key = docs_key(all_docs)
        if getattr(self, "_counts", (None,))[0] != key:
            tokens = self.token_series(all_docs)
            lengths = tokens.list.len().to_numpy().astype(np.int64)
            flat = tokens.explode().drop_nulls()
            # polars, not np.unique: a numpy string array is as wide as the longest token
            terms = flat.unique().sort()
            ids = flat.replace_strict(  # a hash lookup: ranking every token sorts them all
                terms, pl.int_range(len(terms), eager=True), return_dtype=pl.Int64
            )
            terms = terms.to_list()
            entries = (
                pl.DataFrame({"row": np.repeat(np.arange(len(all_docs)), lengths), "id": ids})
                .group_by("row", "id", maintain_order=True)  # first occurrence order
                .len()
            )
            indptr = np.zeros(len(all_docs) + 1, dtype=np.int64)
            np.cumsum(
                np.bincount(entries["row"].to_numpy(), minlength=len(all_docs)), out=indptr[1:]
            )
            counts = csr_matrix(
                (entries["len"].to_numpy().astype(np.float64), entries["id"].to_numpy(), indptr),
                shape=(len(all_docs), len(terms)),
            )
            vocab = {t: i for i, t in enumerate(terms)}
            self._counts = (key, counts, lengths, vocab, {d: i for i, d in enumerate(all_docs)})
        return self._counts[1:]

    def _rows(self, docs: list[str]) -> np.ndarray | None:
        """The documents' rows in the term counts, or None when they are not all there."""
        if getattr(self, "_counts", None) is None:
            return None
        row_of = self._counts[4]
        rows = [row_of.get(d) for d in docs]
        return None if None in rows else np.array(rows, dtype=np.int64)

    def _save_corpus(self, docs: list[str], path: Path) -> None:
        pass

    def _load_corpus(self, docs: list[str], path: Path) -> None:
        pass


class BM25Retriever(_Lexical):
    index_state = ("_stored", "_full")  # what load_index sets (indexes._load)

    def __init__(
        self,
        name: str,
        tokenizer: str = "math",
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        idf: str = "candidates",
        epsilon: float = 0.25,
    ) -> None:
        super().__init__(name, tokenizer)
        if idf not in ("candidates", "corpus"):
            raise ValueError("idf must be 'candidates' or 'corpus'")
        self.k1, self.b, self.method, self.idf = k1, b, method, idf
        self.epsilon = epsilon  # rank_bm25's IDF floor (method rank_bm25 only)
        self._full = None  # (docs_key, bm25s index over every document, text -> row)
        # IDF over the corpus: a candidate's score is its corpus score, one search serves both
        self.candidates_from_corpus = idf == "corpus"

    def _index(self, docs_tokens):
        if self.method == "rank_bm25":
            return OkapiIndex(docs_tokens, self.k1, self.b, self.epsilon)
        import bm25s

        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        # bm25s cannot index an empty document list entry: give empty docs a placeholder token
        index.index([t or ["\x00"] for t in docs_tokens], show_progress=False)
        return index

    def _corpus_index(self, all_docs: list[str]):
        """The bm25s index over every document (built once per document set, or loaded)."""
        key = docs_key(all_docs)
        if self._full is None or self._full[0] != key:
            index = self._index([self.tok(d) for d in all_docs])
            self._full = (key, index, {d: i for i, d in enumerate(all_docs)})
        return self._full[1]

    def fit_corpus(self, all_docs: list[str]) -> None:
        if self.idf == "corpus":
            self._corpus_index(all_docs)

    def fit_candidates(self, docs: list[str]) -> None:
        # the replay is bm25s' lucene arithmetic; other variants keep the per-query fit
        if self.idf == "candidates" and self.method == "lucene":
            self._term_counts(docs)

    def _candidate_idf_scores(self, q: list[str], rows: np.ndarray) -> np.ndarray:
        """bm25s' scores over the candidates ``rows`` as if they were indexed on their own, to the
        bit: its float32 IDF (``math.log``, as bm25s), its float64 term weights stored as float32,
        and the query's terms summed in float32 in query order, repeats included; terms absent
        from every candidate add nothing (bm25s leaves them out of its vocabulary)."""
        counts, lengths, vocab, _ = self._counts[1:]
        ids = [vocab[t] for t in q if t in vocab]
        out = np.zeros(len(rows), dtype=np.float32)
        if not ids:
            return out.astype(np.float64)
        terms, order = np.unique(ids, return_inverse=True)
        tf = counts[rows][:, terms].toarray()
        df = np.count_nonzero(tf, axis=0)
        n = len(rows)
        idf = np.array([math.log(1 + (n - f + 0.5) / (f + 0.5)) for f in df.tolist()])
        idf = idf.astype(np.float32)
        l_d = np.maximum(lengths[rows], 1)  # bm25s indexes an empty document as one placeholder
        l_avg = l_d.mean()
        norm = self.k1 * ((1 - self.b) + self.b * l_d.astype(np.float64) / l_avg)
        weights = (idf * (tf / (norm[:, None] + tf))).astype(np.float32)
        for j in order.tolist():
            out += weights[:, j]
        return out.astype(np.float64)

    def _save_corpus(self, docs: list[str], path: Path) -> None:
        if self.method == "rank_bm25":  # rebuilt from the stored tokens: rank_bm25 has no format
            return
        self._corpus_index(docs).save(str(path / "bm25"), show_progress=False)

    def _load_corpus(self, docs: list[str], path: Path) -> None:
        if self.method == "rank_bm25":
            return
        import bm25s

        index = bm25s.BM25.load(str(path / "bm25"), show_progress=False)
        self._full = (docs_key(docs), index, {d: i for i, d in enumerate(docs)})

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        index = self._corpus_index(all_docs)
        return np.asarray(index.get_scores(self.tok(query) or ["\x01"]), dtype=np.float64)

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        q = self.tok(query) or ["\x01"]
        if self.idf == "corpus" and self._full is not None:
            _, index, row = self._full
            scores = index.get_scores(q)
            return np.array([scores[row[d]] for d in docs], dtype=np.float64)
        rows = self._rows(docs)
        if rows is not None:
            return self._candidate_idf_scores(q, rows)
        return self.bm25s_scores(query, docs)

    def bm25s_scores(self, query: str, docs: list[str]) -> np.ndarray:
        """The reference: bm25s (or rank_bm25) indexing the candidates for this one query."""
        if self.method == "rank_bm25" and not self.tok(query):
            return np.zeros(len(docs))  # as the reference code: no query terms, all zero
        q = self.tok(query) or ["\x01"]
        return np.asarray(self._index([self.tok(d) for d in docs]).get_scores(q), dtype=np.float64)


class OkapiIndex:
    """rank_bm25's ``BM25Okapi`` over token lists, behind the ``get_scores`` bm25s also has."""

    def __init__(self, docs_tokens: list[list[str]], k1: float, b: float, epsilon: float) -> None:
        from rank_bm25 import BM25Okapi

        self.n = len(docs_tokens)
        self._bm25 = BM25Okapi(docs_tokens, k1=k1, b=b, epsilon=epsilon) if self.n else None

    def get_scores(self, query_tokens: list[str]) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(0)
        return np.asarray(self._bm25.get_scores(query_tokens), dtype=np.float64)


class TfidfRetriever(_Lexical):
    """TF-IDF cosine (scikit-learn; sublinear tf unless ``sublinear_tf: false``). The full-corpus
    track fits the vectorizer on every document once and scores a batch of queries with one
    sparse product (each entry is the same sum as one query's product, so the scores are
    identical)."""

    index_state = ("_stored", "_fitted")

    def __init__(self, name: str, tokenizer: str = "math", sublinear_tf: bool = True) -> None:
        super().__init__(name, tokenizer)
        self.sublinear_tf = bool(sublinear_tf)

    def _tf_weight(self, tf: np.ndarray) -> np.ndarray:
        """The vectorizer's term-frequency weight: 1 + ln tf (sublinear) or tf itself."""
        if not self.sublinear_tf:
            return tf.astype(np.float64)
        w = np.log(tf)
        w += 1.0
        return w

    def _fit(self, all_docs: list[str]):
        from sklearn.feature_extraction.text import TfidfVectorizer

        key = docs_key(all_docs)
        if getattr(self, "_fitted", (None,))[0] != key:
            vec = TfidfVectorizer(analyzer=self.tok, sublinear_tf=self.sublinear_tf)
            self._fitted = (key, vec, vec.fit_transform(all_docs))
        return self._fitted[1], self._fitted[2]

    def _save_corpus(self, docs: list[str], path: Path) -> None:
        from scipy.sparse import save_npz

        vec, matrix = self._fit(docs)
        terms = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
        pl.DataFrame({"term": terms}, schema={"term": pl.String}).write_parquet(
            path / "vocabulary.parquet"
        )
        np.save(path / "idf.npy", vec.idf_)
        save_npz(path / "tfidf.npz", matrix.tocsr(), compressed=False)

    def _load_corpus(self, docs: list[str], path: Path) -> None:
        from scipy.sparse import load_npz
        from sklearn.feature_extraction.text import TfidfVectorizer

        terms = pl.read_parquet(path / "vocabulary.parquet")["term"].to_list()
        # a fixed vocabulary and the stored IDF: the fitted vectorizer, without refitting
        vec = TfidfVectorizer(
            analyzer=self.tok,
            sublinear_tf=self.sublinear_tf,
            vocabulary={t: i for i, t in enumerate(terms)},
        )
        vec.idf_ = np.load(path / "idf.npy")
        matrix = load_npz(path / "tfidf.npz")
        if matrix.shape != (len(docs), len(terms)):
            raise ValueError(f"TF-IDF matrix {matrix.shape} for {len(docs)} documents")
        self._fitted = (docs_key(docs), vec, matrix)

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        vec, matrix = self._fit(all_docs)
        return np.asarray((matrix @ vec.transform([query]).T).toarray()).ravel()

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> np.ndarray:
        vec, matrix = self._fit(all_docs)
        return np.asarray((matrix @ vec.transform(queries).T).toarray()).T

    def fit_candidates(self, docs: list[str]) -> None:
        self._term_counts(docs)

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        rows = self._rows(docs)
        if rows is not None:
            return self._candidate_scores(query, rows)
        return self.sklearn_scores(query, docs)

    def _candidate_scores(self, query: str, rows: np.ndarray) -> np.ndarray:
        """``sklearn_scores`` to the bit, from the corpus counts. The vectorizer's arithmetic is
        replayed in its order: its vocabulary is the candidates' terms sorted; a document row
        stores its terms in the order they first occur across the candidates (its insertion ids),
        and the row norms and the sparse product sum in that stored order (a running sum:
        ``cumsum``, never numpy's pairwise ``sum``); the query's row is in sorted order."""
        counts, _, vocab, _ = self._counts[1:]
        sub = counts[rows]
        n = len(rows)
        if sub.nnz == 0:  # every candidate empty: the vectorizer has no vocabulary
            return np.zeros(n)
        present, first = np.unique(sub.indices, return_index=True)
        insertion = np.empty(present.size, dtype=np.int64)
        insertion[np.argsort(first)] = np.arange(present.size)
        col = np.searchsorted(present, sub.indices)
        row = np.repeat(np.arange(n), np.diff(sub.indptr))
        order = np.lexsort((insertion[col], row))
        col, tf, row = col[order], sub.data[order], row[order]
        df = np.bincount(col, minlength=present.size).astype(np.float64) + 1.0
        idf = np.full_like(df, n + 1)
        idf /= df
        np.log(idf, out=idf)
        idf += 1.0
        w = self._tf_weight(tf)
        w *= idf[col]
        slot = np.arange(len(col)) - sub.indptr[:-1][row]  # place within its row
        grid = np.zeros((n, int(np.diff(sub.indptr).max())))
        grid[row, slot] = w * w
        norm = np.sqrt(np.cumsum(grid, axis=1)[:, -1])
        d = w / norm[row]
        q_ids = np.array([vocab[t] for t in self.tok(query) if t in vocab], dtype=np.int64)
        q_ids = q_ids[np.isin(q_ids, present)]  # terms no candidate holds are not in its vocabulary
        q_cols, q_tf = np.unique(np.searchsorted(present, q_ids), return_counts=True)
        q_tf = q_tf.astype(np.float64)
        if q_cols.size == 0:
            return np.zeros(n)
        qw = self._tf_weight(q_tf)
        qw *= idf[q_cols]
        qv = np.zeros(present.size)
        qv[q_cols] = qw / np.sqrt(np.cumsum(qw * qw)[-1])
        grid[:] = 0.0
        grid[row, slot] = d * qv[col]
        return np.cumsum(grid, axis=1)[:, -1]

    def sklearn_scores(self, query: str, docs: list[str]) -> np.ndarray:
        """The reference: a vectorizer fitted on this one query's candidates."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(analyzer=self.tok, sublinear_tf=self.sublinear_tf)
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
    index_state = ("_stored", "_docs")

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

    def _doc_sets(self, all_docs: list[str]):
        key = docs_key(all_docs)
        if getattr(self, "_docs", (None,))[0] != key:
            vocab: dict[str, int] = {}
            d, d_sizes = self._sets(all_docs, vocab, grow=True)
            self._docs = (key, vocab, d.T.tocsr(), d_sizes)
        return self._docs[1:]

    def _save_corpus(self, docs: list[str], path: Path) -> None:
        from scipy.sparse import save_npz

        vocab, d_t, d_sizes = self._doc_sets(docs)
        pl.DataFrame({"term": list(vocab)}, schema={"term": pl.String}).write_parquet(
            path / "vocabulary.parquet"
        )
        save_npz(path / "sets.npz", d_t, compressed=False)
        np.save(path / "sizes.npy", d_sizes)

    def _load_corpus(self, docs: list[str], path: Path) -> None:
        from scipy.sparse import load_npz

        terms = pl.read_parquet(path / "vocabulary.parquet")["term"].to_list()
        d_t, sizes = load_npz(path / "sets.npz").tocsr(), np.load(path / "sizes.npy")
        if d_t.shape[1] != len(docs) or sizes.shape != (len(docs),):
            raise ValueError(f"token sets {d_t.shape} for {len(docs)} documents")
        self._docs = (docs_key(docs), {t: i for i, t in enumerate(terms)}, d_t, sizes)

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> np.ndarray:
        vocab, d_t, d_sizes = self._doc_sets(all_docs)
        q, q_sizes = self._sets(queries, vocab, grow=False)
        q.resize((len(queries), d_t.shape[0]))
        inter = np.asarray((q @ d_t).toarray(), dtype=np.float64)
        union = q_sizes[:, None] + d_sizes[None, :] - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(union > 0, inter / union, 0.0)


KINDS = (
    Kind("bm25", BM25Retriever),
    Kind("tfidf", TfidfRetriever),
    Kind("jaccard", JaccardRetriever),
)
