"""A retriever's candidate scores read back from its run where the same scoring is asked again: a
fusion takes its components' scores from their runs of the same domain and setting instead of
running them a second time (on the full config the fusion's runs were 47 s, all of it its
components' work over again).

Every row of a run carries ``run_key``: what the run's candidate scores depend on. That is the
entry's scoring fields and model (``provenance``), the scoring code, the setting, every document
text (a statistic fitted on the corpus, e.g. BM25's corpus IDF) and the evaluated queries with
their candidates (one fitted on the candidates). A component's rows are read only under the key
the fusion computes for it. Whatever is not read is scored again, and the reason is said: no run
yet, a run of other inputs, a query that failed there."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import document_texts, setting_texts
from saber_assets.retrievers.base import scores_key
from saber_assets.retrievers.entries import RetrieverEntry
from saber_assets.retrievers.fusion import SavedScores
from saber_assets.runs.provenance import provenance

RUN_KEY = "run_key"

# (query id, the query's text in the setting, its candidates' document rows)
Query = tuple[str, str, list[int]]


def evaluated_queries(bench: Benchmark, setting: str, rows: list[int]) -> list[Query]:
    """The queries at ``rows`` as ``evaluate`` asks them in ``setting``."""
    q = bench.queries[rows].select("id", "problem", "solution", "candidates")
    return [
        (qid, setting_texts(setting, prob, sol, as_query=True), list(cands))
        for qid, prob, sol, cands in q.iter_rows()
    ]


def documents_digest(bench: Benchmark) -> str:
    """Identity of the benchmark's documents (ids and texts, in order), for run keys: a hash of
    every row (polars', 30 ms at 283K documents where hashing the texts took 0.2–0.5 s a setting,
    paid by every run). Another polars may hash otherwise: a fusion then scores its components
    itself once, never reads a run of other documents."""
    rows = bench.documents.select("id", "problem", "solution").hash_rows(1, 2, 3, 4)
    return hashlib.blake2b(rows.to_numpy().tobytes(), digest_size=16).hexdigest()


def run_key(
    entry: RetrieverEntry, setting: str, documents: str, queries: list[Query], code: str
) -> str:
    """The key of an entry's run over ``queries`` in ``setting`` (module docstring):
    ``documents``, the benchmark's ``documents_digest``; ``code``, the scoring code's digest
    (``provenance.SCORING_CODE``)."""
    fields = {k: v for k, v in provenance(entry, "", code).items() if k != "benchmark_id"}
    h = hashlib.blake2b(digest_size=16)
    h.update(json.dumps([fields, setting, documents], sort_keys=True, default=str).encode())
    for qid, text, cands in queries:
        h.update(scores_key(qid, [text]))
        h.update(np.asarray(cands, dtype=np.int64).tobytes() + b"|")
    return h.hexdigest()


def saved_scores(
    run_file: Path, key: str, setting: str, doc_texts: list[str], queries: list[Query]
) -> tuple[dict[bytes, SavedScores], str]:
    """The scores a run file holds for ``queries`` under ``key``, by request (``scores_key`` of
    the query's and its candidates' texts), and one line saying what was read or why nothing."""
    if not run_file.exists():
        return {}, "no run of this domain yet"
    runs = pl.read_parquet(run_file)
    if RUN_KEY not in runs.columns:
        return {}, "its run holds no run key (written before runs were keyed)"
    runs = runs.filter(pl.col("setting") == setting)
    if runs.is_empty():
        return {}, f"its run has no {setting} rows"
    runs = runs.filter(pl.col(RUN_KEY) == key)
    if runs.is_empty():
        return {}, "its run was made from other inputs (entry, code, documents or queries)"
    by_id = {
        qid: SavedScores(np.asarray(scores, dtype=np.float64), float(ms or 0.0), int(bad or 0))
        for qid, failed, scores, ms, bad in runs.select(
            "query_id", "failed", "scores", "latency_ms", "doc_failures"
        ).iter_rows()
        if not failed and scores is not None
    }
    saved = {
        scores_key(text, [doc_texts[c] for c in cands]): by_id[qid]
        for qid, text, cands in queries
        if qid in by_id
    }
    line = f"{len(saved)} of {len(queries)} queries' scores read from its run"
    if len(saved) < len(queries):
        line += f" ({len(queries) - len(saved)} failed there: scored again)"
    return saved, line


def component_scores(
    runs_dir: Path,
    components: list[tuple[str, RetrieverEntry | None]],
    domain_key: str,
    setting: str,
    bench: Benchmark,
    queries: list[Query],
    documents: str,
    code: str,
) -> tuple[list[dict[bytes, SavedScores]], list[str]]:
    """For a fusion's ``components`` (``registry.components_of``): each one's saved scores for
    this domain's ``queries`` in ``setting`` (``FusionRetriever.reuse``), and a line for each;
    ``documents``: the benchmark's ``documents_digest``."""
    doc_texts = document_texts(bench, setting)
    saved, lines = [], []
    for name, entry in components:
        if entry is None:
            found, line = {}, "not registered"
        else:
            key = run_key(entry, setting, documents, queries, code)
            found, line = saved_scores(
                runs_dir / name / f"{domain_key}.parquet", key, setting, doc_texts, queries
            )
        saved.append(found)
        lines.append(f"{name}: {line}")
    return saved, lines
