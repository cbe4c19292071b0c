"""Score a retriever on a benchmark: per-query nDCG on the candidates (re-ranking track) and, over
all documents, nDCG'@k on the condensed list plus recall@100 of the five best-rated candidates
(full-corpus track). Retriever failures are recorded per query, never dropped silently."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import document_texts, setting_texts
from saber_assets.retrievers.base import SKIPPED, RetrieverFailed
from saber_assets.runs.metrics import (
    condensed_ndcg,
    graded_ndcg,
    judged_at,
    ndcg_at_k,
    recall_of_top,
    top_rows,
)

RUN_SCHEMA = {
    "query_id": pl.String,
    "domains": pl.List(pl.String),
    "setting": pl.String,
    "ndcg": pl.Float64,
    "ndcg_linear": pl.Float64,
    "failed": pl.Boolean,
    "error": pl.String,
    "latency_ms": pl.Float64,
    "doc_failures": pl.Int64,
    "full_ndcg_prime": pl.Float64,
    "full_recall_top5_at100": pl.Float64,
    "scores": pl.List(pl.Float64),
    # the full-corpus top k (document ids, best first): what the fill pools (holes.py); the
    # share of it with a grade, and its nDCG@k with every ungraded document as 0
    "full_top": pl.List(pl.String),
    "full_top_scores": pl.List(pl.Float64),  # their scores: the track's TREC run file
    "full_judged": pl.Float64,
    "full_ndcg_zero": pl.Float64,
}


QUERY_CHUNK = 64  # queries scored against the whole corpus at once (bounds memory: 64 x N floats)


def corpus_score_matrix(
    retriever, queries: list[str], doc_texts: list[str]
) -> tuple[np.ndarray, dict[int, str]]:
    """Scores of every query against every document, shape (queries, documents), and the queries
    that failed (row -> reason; their rows are NaN): the retriever's bulk
    ``corpus_scores_batch`` where it has one (a list of score arrays or exceptions), else one
    ``corpus_scores`` call per query."""
    out = np.full((len(queries), len(doc_texts)), np.nan)
    errors: dict[int, str] = {}
    if hasattr(retriever, "corpus_scores_batch"):
        results = list(retriever.corpus_scores_batch(queries, doc_texts))
    else:
        results = []
        for q in queries:
            try:
                results.append(retriever.corpus_scores(q, doc_texts))
            except (RetrieverFailed, AttributeError) as exc:
                results.append(exc)
    for n, r in enumerate(results):
        if isinstance(r, Exception):
            errors[n] = str(r)
            continue
        r = np.asarray(r, dtype=np.float64)
        if r.shape != (len(doc_texts),):
            errors[n] = f"{r.shape} corpus scores for {len(doc_texts)} documents"
            continue
        if np.isnan(r).any():  # a NaN has no place in a ranking: say so instead of guessing one
            bad = np.flatnonzero(np.isnan(r))
            errors[n] = f"{bad.size} corpus scores are NaN (documents {bad[:5].tolist()})"
            continue
        out[n] = r
    return out, errors


def skipped(runs: pl.DataFrame) -> pl.Expr:
    """The rows of ``runs`` whose query the retriever skipped by its own rule
    (``RetrieverSkipped``); none where the runs carry no errors."""
    if "error" not in runs.columns:
        return pl.lit(False)
    return pl.col("error").str.starts_with(SKIPPED).fill_null(False)


def failed(error: str) -> dict:
    """A query's row fields when it could not be scored: nDCG 0, named, counted."""
    return {"failed": True, "error": error, "ndcg": 0.0, "ndcg_linear": 0.0, "latency_ms": None,
            "scores": None, "full_ndcg_prime": None, "full_recall_top5_at100": None,
            "full_top": None, "full_top_scores": None, "full_judged": None,
            "full_ndcg_zero": None}  # fmt: skip


def candidate_metrics(scores: np.ndarray, rel, k: int) -> dict:
    """The re-ranking track of one query (its candidates' scores); no full-corpus figures yet."""
    return {
        "ndcg": ndcg_at_k(scores, rel, k, "exponential"),
        "ndcg_linear": ndcg_at_k(scores, rel, k, "linear"),
        "scores": scores.tolist(),
        "full_ndcg_prime": None,
        "full_recall_top5_at100": None,
        "full_top": None,
        "full_top_scores": None,
        "full_judged": None,
        "full_ndcg_zero": None,
    }


RECALL_TOP, RECALL_DEPTH = 5, 100  # recall of the five best-rated candidates within the top 100


def top_metrics(
    top: list[str], cands, rel, k: int, doc_ids, scores: list[float] | None = None
) -> dict:
    """A full-corpus top k (``scores``: theirs, where known), and its holes counted: judged@k
    and nDCG@k with holes as 0."""
    grades = {doc_ids[c]: g for c, g in zip(cands, rel, strict=True)}
    return {"full_top": top, "full_top_scores": scores, "full_judged": judged_at(top, grades, k),
            "full_ndcg_zero": graded_ndcg(top, grades, k)}  # fmt: skip


def full_corpus_metrics(ranked_rows: list[int], cands, rel, k: int, doc_ids) -> dict:
    """The full-corpus track of one query from its ranking of document rows (a run file's)."""
    return {
        **top_metrics([doc_ids[r] for r in ranked_rows[:k]], cands, rel, k, doc_ids),
        "full_ndcg_prime": condensed_ndcg(ranked_rows, list(cands), list(rel), k),
        "full_recall_top5_at100": recall_of_top(
            ranked_rows, list(cands), list(rel), RECALL_TOP, RECALL_DEPTH
        ),
    }


def full_corpus_metrics_from_scores(all_scores: np.ndarray, cands, rel, k: int, doc_ids) -> dict:
    """The full-corpus track of one query from its scores over every document.

    Equal to ranking every document by (score descending, row ascending) — a stable argsort — and
    reading the candidates' places, without sorting the corpus (at 283K documents the sort and the
    Python walk over the ranking cost ~50 ms per query): the candidates are ordered among
    themselves, and whether one lies within the recall depth is decided by the depth-th best score
    (``np.partition``) and, on a tie with it, its row's place among the tied documents."""
    cands = np.asarray(cands, dtype=np.int64)
    s = all_scores[cands]
    order = np.lexsort((cands, -s))
    ranked = cands[order]
    n, depth = len(all_scores), RECALL_DEPTH
    floor = None  # the depth-th best score, which the top k reaches too (k <= depth)
    if n <= depth:
        within = ranked
    else:
        t = np.partition(all_scores, n - depth)[n - depth]  # the depth-th best score
        keep = s > t  # fewer than depth documents score above t
        tied = s == t
        if tied.any():
            tie_rows = np.flatnonzero(all_scores == t)
            place = np.searchsorted(tie_rows, cands[tied])
            keep[tied] = np.count_nonzero(all_scores > t) + place < depth
        within = ranked[keep[order]]
        floor = t if k <= depth else None
    cands_l, rel_l = cands.tolist(), list(rel)
    top = top_rows(all_scores, k, floor)
    return {
        **top_metrics(
            [doc_ids[r] for r in top.tolist()], cands_l, rel_l, k, doc_ids, all_scores[top].tolist()
        ),  # fmt: skip
        "full_ndcg_prime": condensed_ndcg(ranked.tolist(), cands_l, rel_l, k),
        "full_recall_top5_at100": recall_of_top(
            within.tolist(), cands_l, rel_l, RECALL_TOP, RECALL_DEPTH
        ),
    }


def evaluate(
    retriever,
    bench: Benchmark,
    setting: str,
    k: int = 10,
    query_filter: Sequence[int] | None = None,
    full_corpus: bool = True,
) -> pl.DataFrame:
    """Per query: nDCG on its candidates and, with ``full_corpus``, the full-corpus track.

    The full-corpus track scores a chunk of queries against all documents at once. A retriever
    with ``candidates_from_corpus = True`` (its candidate scores are, by construction, its corpus
    scores restricted to the candidates) is searched once per query for both tracks; without the
    full-corpus track, one with ``candidates_by_row`` scores a chunk's candidates by document
    row (``candidate_scores_batch``). Either way its latency is the chunk's time per query."""
    docs = bench.documents
    doc_ids = docs["id"].to_list() if full_corpus else []
    doc_texts = document_texts(bench, setting)
    if hasattr(retriever, "fit_corpus"):
        retriever.fit_corpus(doc_texts)
    q = bench.queries if query_filter is None else bench.queries[list(query_filter)]
    # the queries' own rows among the documents (a dict of every document id cost 0.2 s a
    # setting at 283K documents, for a score or two per query)
    own = docs.select(pl.col("id"), pl.int_range(pl.len()).alias("row"))
    doc_row = dict(own.filter(pl.col("id").is_in(q["id"].implode())).iter_rows())
    if hasattr(retriever, "fit_candidates"):  # statistics over each query's candidates
        union = sorted({c for cands in q["candidates"].to_list() for c in cands})
        retriever.fit_candidates([doc_texts[c] for c in union])
    items = list(
        q.select(
            "id", "problem", "solution", "candidates", "relevance_scores", "domains"
        ).iter_rows()
    )
    shared = full_corpus and getattr(retriever, "candidates_from_corpus", False)
    by_row = not full_corpus and getattr(retriever, "candidates_by_row", False)
    rows = []
    for start in range(0, len(items), QUERY_CHUNK):
        chunk = items[start : start + QUERY_CHUNK]
        texts = [setting_texts(setting, prob, sol, as_query=True) for _, prob, sol, *_ in chunk]
        matrix, errors, per_query_ms, by_row_scores = None, {}, None, []
        t0 = time.perf_counter()
        if full_corpus:
            matrix, errors = corpus_score_matrix(retriever, texts, doc_texts)
        elif by_row:
            cand_rows = [list(c[3]) for c in chunk]
            by_row_scores = retriever.candidate_scores_batch(texts, cand_rows, doc_texts)
        if full_corpus or by_row:
            per_query_ms = 1000 * (time.perf_counter() - t0) / max(len(chunk), 1)
        for n, ((qid, _, _, cands, rel, domains), query) in enumerate(
            zip(chunk, texts, strict=True)
        ):
            row = {"query_id": qid, "domains": domains, "setting": setting, "failed": False}
            row |= {"error": None, "doc_failures": 0}
            t0 = time.perf_counter()
            try:
                if shared:
                    if n in errors:
                        raise RetrieverFailed(errors[n])
                    scores = matrix[n, list(cands)]
                elif by_row:
                    if isinstance(by_row_scores[n], RetrieverFailed):
                        raise by_row_scores[n]
                    scores = np.asarray(by_row_scores[n], dtype=np.float64)
                else:
                    scores = np.asarray(
                        retriever.score(query, [doc_texts[c] for c in cands]), dtype=np.float64
                    )
                if scores.shape != (len(cands),) or not np.all(np.isfinite(scores)):
                    raise RetrieverFailed(
                        f"returned {scores.shape} scores (finite: {bool(np.all(np.isfinite(scores)))}) for {len(cands)} candidates"
                    )
            except RetrieverFailed as exc:
                rows.append(row | failed(str(exc)))
                continue
            row["latency_ms"] = (
                per_query_ms
                if shared or by_row
                # a fusion's scores read from its components' runs cost what those runs measured
                else 1000 * (time.perf_counter() - t0) + getattr(retriever, "last_saved_ms", 0.0)
            )
            # documents a re-ranker could not judge (kept in first-stage order, counted)
            row["doc_failures"] = int(getattr(retriever, "last_failed", 0))
            row |= candidate_metrics(scores, rel, k)
            if full_corpus and n in errors:
                row["error"] = f"full-corpus track: {errors[n]}"
            elif full_corpus:
                all_scores = matrix[n].copy()
                if qid in doc_row:
                    all_scores[doc_row[qid]] = -np.inf  # never retrieve the query itself
                row |= full_corpus_metrics_from_scores(all_scores, cands, rel, k, doc_ids)
            rows.append(row)
    return pl.DataFrame(rows, schema=RUN_SCHEMA)


def rescore_runs(
    runs: pl.DataFrame,
    relevance: dict[str, list[float]],
    k: int,
    gain: str = "exponential",
    ties: str = "average",
    grades=None,
) -> pl.DataFrame:
    """The runs' per-query nDCG@k recomputed from their stored candidate scores (no retriever
    runs again): against ``relevance`` (query id -> grades in candidate order), optionally
    transformed per query by ``grades``, with another ``gain`` or tie rule. A failed query
    keeps no score (None)."""
    ndcg = []
    for qid, failed, scores in runs.select("query_id", "failed", "scores").iter_rows():
        if failed or scores is None:
            ndcg.append(None)
            continue
        rel = grades(relevance[qid]) if grades else relevance[qid]
        ndcg.append(ndcg_at_k(scores, rel, k, gain, ties))
    return runs.with_columns(pl.Series("ndcg", ndcg, dtype=pl.Float64))


def with_ties(
    runs: pl.DataFrame, relevance: dict[str, list[float]], k: int, ties: str
) -> pl.DataFrame:
    """The runs under the leaderboard's tie rule: ``average`` as they were scored, ``order``
    rescored with numpy's argsort order deciding among tied scores (the reference code's). A
    failed query scores 0 under both, as the board scores it."""
    if ties == "average" or runs.height == 0:
        return runs
    if ties != "order":
        raise ValueError(f"leaderboard.ties must be 'average' or 'order', not {ties!r}")
    return rescore_runs(runs, relevance, k, ties="numpy").with_columns(
        pl.when(pl.col("failed")).then(0.0).otherwise(pl.col("ndcg")).alias("ndcg")
    )
