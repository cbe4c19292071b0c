"""Bulk scoring is a speed change, not a metric change: the same scores as one query at a time."""

import numpy as np
import polars as pl
import pytest

from saber_assets.benchmark.data import QUERY_SCHEMA, Benchmark
from saber_assets.retrievers.approach0 import Approach0Retriever
from saber_assets.retrievers.base import RetrieverFailed
from saber_assets.retrievers.dense import DenseRetriever, SSEmbRetriever
from saber_assets.retrievers.lexical import (
    BM25Retriever,
    JaccardRetriever,
    TfidfRetriever,
)
from saber_assets.runs.evaluate import (
    corpus_score_matrix,
    evaluate,
    full_corpus_metrics,
    full_corpus_metrics_from_scores,
)

from .test_leaderboard import toy_benchmark


class OneAtATime:
    """The retriever as it was: no bulk method, candidates scored on their own."""

    def __init__(self, inner):
        self.inner = inner
        if hasattr(inner, "fit_corpus"):
            self.fit_corpus = inner.fit_corpus

    def score(self, query, docs):
        return self.inner.score(query, docs)

    def corpus_scores(self, query, docs):
        return self.inner.corpus_scores(query, docs)


class HashEmbedder:
    """A deterministic stand-in model: bag of character trigrams, hashed, normalised."""

    model_id, revision, dim = "hash", "1", 64

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for k in range(len(t) - 2):
                out[i, hash(t[k : k + 3]) % self.dim] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def _bench(n_docs=300, n_queries=40, seed=0) -> Benchmark:
    rng = np.random.default_rng(seed)
    words = "prime sum triangle circle root modulo digit square graph vertex limit series".split()
    formulas = ["$x^2+y^2=z^2$", "$a+b=c$", "$\\frac{1}{n}$", "$n!$", "$\\sqrt{2}$", ""]
    docs = pl.DataFrame(
        {
            "id": [f"d{i}" for i in range(n_docs)],
            "problem": [
                " ".join(rng.choice(words, 8)) + " " + rng.choice(formulas) for _ in range(n_docs)
            ],
            "solution": [" ".join(rng.choice(words, 12)) for _ in range(n_docs)],
        }
    )
    q_rows = []
    for q in range(n_queries):
        cands = rng.choice(np.arange(1, n_docs), 12, replace=False).tolist()
        q_rows.append(
            {
                "id": f"d{q}",  # queries are documents too: the full track skips them
                "problem": docs["problem"][q],
                "solution": docs["solution"][q],
                "candidates": cands,
                "relevance_scores": rng.uniform(0, 5, 12).tolist(),
                "domains": ["A"],
            }
        )
    return Benchmark(pl.DataFrame(q_rows, schema=QUERY_SCHEMA), docs, {"domains": ["A"]})


def _same_runs(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a["query_id"].to_list() == b["query_id"].to_list()
    for sa, sb in zip(a["scores"].to_list(), b["scores"].to_list(), strict=True):
        assert (
            np.argsort(-np.array(sa), kind="stable").tolist()
            == np.argsort(-np.array(sb), kind="stable").tolist()
        )
        assert np.allclose(sa, sb, rtol=0, atol=1e-12)
    for col in ("ndcg", "full_ndcg_prime", "full_recall_top5_at100"):
        assert np.allclose(a[col].to_numpy(), b[col].to_numpy(), rtol=0, atol=1e-9), col


@pytest.mark.parametrize("setting", ["statement-statement", "full-full"])
def test_bulk_equals_one_query_at_a_time(setting):
    bench = _bench()
    makers = {
        "jaccard": lambda: JaccardRetriever("j"),
        "jaccard-plain": lambda: JaccardRetriever("j", tokenizer="plain"),
        "bm25-corpus-idf": lambda: BM25Retriever("b", idf="corpus"),
        "tfidf": lambda: TfidfRetriever("t"),
        "dense": lambda: _dense(),
        "ssemb": lambda: _ssemb(),
    }
    for name, make in makers.items():
        bulk = evaluate(make(), bench, setting, 10)
        alone = evaluate(OneAtATime(make()), bench, setting, 10)
        _same_runs(bulk, alone)
        assert not bulk["failed"].any(), name


@pytest.mark.parametrize("make", [lambda: _dense(), lambda: _ssemb()], ids=["dense", "ssemb"])
def test_candidates_only_dense_runs_embed_a_chunk_of_queries_at_once(make):
    """Without the full-corpus track the e5 family scores candidates by row, a chunk's queries
    embedded in one batch: the same scores as one query at a time, fewer model calls."""
    bench = _bench()
    bulk, alone = make(), OneAtATime(make())
    calls = []
    inner = (bulk.text if hasattr(bulk, "text") else bulk).queries.inner
    encode = inner.encode
    inner.encode = lambda texts: calls.append(len(texts)) or encode(texts)
    a = evaluate(bulk, bench, "statement-statement", 10, full_corpus=False)
    b = evaluate(alone, bench, "statement-statement", 10, full_corpus=False)
    assert calls == [40]  # every query of the chunk in one batch
    assert a["query_id"].to_list() == b["query_id"].to_list() and not a["failed"].any()
    for sa, sb in zip(a["scores"].to_list(), b["scores"].to_list(), strict=True):
        assert np.array_equal(np.array(sa), np.array(sb))
    assert a["ndcg"].to_list() == b["ndcg"].to_list()


def _dense():
    r = DenseRetriever("d", backend="cpu")
    from saber_resources.embeddings import CachedEmbedder

    r.queries = CachedEmbedder(HashEmbedder(), None, prefix="q: ")
    r.docs = CachedEmbedder(HashEmbedder(), None)
    return r


def _ssemb():
    r = SSEmbRetriever("s", alpha=0.4)
    r.text = _dense()
    return r


class PerQuery:
    """A candidate-IDF retriever as it was: bm25s or scikit-learn fitted on each query's
    candidates."""

    def __init__(self, inner):
        self.inner = inner

    def score(self, query, docs):
        if isinstance(self.inner, BM25Retriever):
            return self.inner.bm25s_scores(query, docs)
        assert isinstance(self.inner, TfidfRetriever)
        return self.inner.sklearn_scores(query, docs)


def _raw_tf_tfidf(name, tokenizer):
    """TF-IDF with scikit-learn's default (raw) term frequencies, the reference code's."""
    return TfidfRetriever(name, tokenizer=tokenizer, sublinear_tf=False)


@pytest.mark.parametrize("kind", [BM25Retriever, TfidfRetriever, _raw_tf_tfidf])
@pytest.mark.parametrize("tokenizer", ["math", "plain", "whitespace", "sklearn"])
@pytest.mark.parametrize("setting", ["statement-statement", "statement-full", "full-full"])
def test_candidate_idf_from_corpus_counts_equals_the_per_query_fit_to_the_bit(
    setting, tokenizer, kind
):
    """BM25 and TF-IDF with statistics over the candidates, from the corpus term counts, give
    the per-query fit's scores exactly (==), so the rankings, ties included, and the metrics are
    the same. The benchmark has an empty document, queries with repeated terms, an empty query
    and terms no candidate holds."""
    bench = _bench(seed=3)
    docs = bench.documents.with_columns(
        pl.when(pl.col("id") == "d7").then(pl.lit("")).otherwise(pl.col("problem")).alias("problem")
    )
    queries = bench.queries.with_columns(
        pl.Series("problem", [p + " prime prime zebra" for p in bench.queries["problem"]])
    )
    queries = queries.with_columns(
        pl.when(pl.col("id") == "d3")
        .then(pl.lit(""))
        .otherwise(pl.col("problem"))
        .alias("problem"),
        pl.when(pl.col("id") == "d4")
        .then(pl.col("candidates").list.concat(pl.lit([7])))
        .otherwise(pl.col("candidates")),
    )
    queries = queries.with_columns(
        pl.when(pl.col("id") == "d4")
        .then(pl.col("relevance_scores").list.concat(pl.lit([1.0])))
        .otherwise(pl.col("relevance_scores"))
    )
    bench = Benchmark(queries, docs, bench.manifest)
    fast = kind("r", tokenizer=tokenizer)
    bulk = evaluate(fast, bench, setting, 10)
    assert fast._counts is not None  # the corpus counts were used, not a fit per query
    ref = evaluate(PerQuery(kind("r", tokenizer=tokenizer)), bench, setting, 10)
    assert bulk["scores"].to_list() == ref["scores"].to_list()
    for col in ("ndcg", "ndcg_linear"):
        assert bulk[col].to_list() == ref[col].to_list()
    assert not bulk["failed"].any()


def test_tfidf_batch_is_the_single_query_product_exactly():
    bench = _bench()
    docs = [p + " " + s for p, s in bench.documents.select("problem", "solution").iter_rows()]
    queries = bench.queries["problem"].to_list()
    r = TfidfRetriever("t")
    batch = r.corpus_scores_batch(queries, docs)
    assert batch.shape == (len(queries), len(docs))
    for n, q in enumerate(queries):
        assert np.array_equal(batch[n], TfidfRetriever("t").corpus_scores(q, docs))


def test_jaccard_batch_matches_the_set_formula_exactly():
    r = JaccardRetriever("j")
    docs = ["a b c", "b c d e", "", "x y", "a a a"]
    got = r.corpus_scores_batch(["a b z", "", "q"], docs)
    want = np.stack([r.score(q, docs) for q in ["a b z", "", "q"]])
    assert np.array_equal(got, want) and got[0, 0] == 2 / 4


def test_a_failing_query_fails_alone_in_a_batch():
    class Picky:
        candidates_from_corpus = True

        def corpus_scores_batch(self, queries, docs):
            return [RetrieverFailed("no terms") if q == "" else np.ones(len(docs)) for q in queries]

    matrix, errors = corpus_score_matrix(Picky(), ["a", "", "b"], ["x", "y"])
    assert errors == {1: "no terms"} and np.isnan(matrix[1]).all() and (matrix[[0, 2]] == 1).all()


def test_a_nan_corpus_score_fails_its_query_with_the_documents_named():
    class Sloppy:
        def corpus_scores_batch(self, queries, docs):
            return [np.array([1.0, np.nan]) if q == "b" else np.ones(len(docs)) for q in queries]

    matrix, errors = corpus_score_matrix(Sloppy(), ["a", "b"], ["x", "y"])
    assert errors == {1: "1 corpus scores are NaN (documents [1])"} and (matrix[0] == 1).all()


@pytest.mark.parametrize("n_docs", [40, 99, 100, 101, 250, 3000])
@pytest.mark.parametrize("levels", [3, 20, 10**6])
def test_full_corpus_metrics_without_sorting_the_corpus_equal_the_full_ranking(n_docs, levels):
    """Against a stable argsort of every document, on scores with many ties (3 distinct values),
    some (20) and almost none, at corpus sizes around the recall depth of 100; candidates on the
    depth-th score's tie group, the query's own row at -inf and signed zeros included."""
    rng = np.random.default_rng(n_docs * 7 + levels)
    for trial in range(30):
        scores = rng.integers(0, levels, n_docs).astype(np.float64) / levels
        scores[rng.random(n_docs) < 0.05] = -0.0
        scores[rng.integers(n_docs)] = -np.inf
        n_cands = min(n_docs, int(rng.integers(1, 60)))
        cands = rng.choice(n_docs, n_cands, replace=False)
        if n_docs > 100 and trial % 2:  # plant candidates on the boundary tie group
            t = np.sort(scores)[::-1][99]
            on_t = np.flatnonzero(scores == t)
            cands = np.unique(np.r_[cands, rng.choice(on_t, min(5, on_t.size), replace=False)])
        rel = rng.integers(0, 6, len(cands)) * rng.random(len(cands))
        ranked = np.argsort(-scores, kind="stable").tolist()
        ids = [f"d{i}" for i in range(n_docs)]
        want = full_corpus_metrics(ranked, cands.tolist(), rel.tolist(), 10, ids)
        got = full_corpus_metrics_from_scores(scores, cands.tolist(), rel.tolist(), 10, ids)
        # the top 10 too: a stable sort's, with its scores (the track's TREC run)
        assert got.pop("full_top_scores") == scores[ranked[:10]].tolist()
        assert want.pop("full_top_scores") is None  # a ranking of rows alone has no scores
        assert got == want, (trial, got, want)


def test_approach0_searches_once_per_query_in_parallel():
    bench = toy_benchmark()
    docs = (bench.documents["problem"]).to_list()
    queries = [bench.queries["problem"][0], "Evaluate $\\int_0^1 x^2\\,dx$.", "!!"]
    one = Approach0Retriever(workers=1).corpus_scores_batch(queries, docs)
    two = Approach0Retriever(workers=2).corpus_scores_batch(queries, docs)
    assert isinstance(one[2], RetrieverFailed) and isinstance(two[2], RetrieverFailed)
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    cands = bench.queries["candidates"][0].to_list()
    assert cands[int(np.argmax(one[0][cands]))] == 4  # the renamed twin, as with its own index
    run = evaluate(Approach0Retriever(), bench, "statement-statement")
    assert run["scores"][0].to_list() == one[0][bench.queries["candidates"][0].to_list()].tolist()


def test_the_full_corpus_track_never_retrieves_the_query_itself(monkeypatch):
    """Each query is also a document (its best match by far): the full-corpus track sees its
    own row at -inf, and only its own; queries of the filter that are no document see none."""
    from saber_assets.runs import evaluate as ev

    bench = _bench(n_docs=60, n_queries=6)
    seen = []
    real = ev.full_corpus_metrics_from_scores

    def spy(all_scores, cands, rel, k, doc_ids):
        seen.append(np.flatnonzero(np.isneginf(all_scores)).tolist())
        return real(all_scores, cands, rel, k, doc_ids)

    monkeypatch.setattr(ev, "full_corpus_metrics_from_scores", spy)
    ev.evaluate(JaccardRetriever("j"), bench, "full-full", 10, query_filter=[4, 1, 3])
    assert seen == [[4], [1], [3]]
    seen.clear()
    other = Benchmark(bench.queries.with_columns(pl.lit("q-x").alias("id")), bench.documents)
    ev.evaluate(JaccardRetriever("j"), other, "full-full", 10, query_filter=[2])
    assert seen == [[]]
