"""Outside runs scored like our own: a TREC run file from any system (``saber evaluate-run``),
read, its tags mapped to settings, and scored with the leaderboard's metric and CIs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.benchmark.texts import SETTINGS
from saber_assets.leaderboard.evaluate import (
    RUN_SCHEMA,
    candidate_metrics,
    failed,
    full_corpus_metrics,
)


def setting_of(tag: str, default: str | None) -> str | None:
    """The setting a run's tag names (``bm25-statement-full`` → statement-full), else ``default``."""
    return next((s for s in SETTINGS if tag == s or tag.endswith("-" + s)), default)


def evaluate_run(
    run: Mapping[str, Mapping[str, float]],
    bench: Benchmark,
    setting: str,
    k: int = 10,
    full_corpus: bool = True,
) -> pl.DataFrame:
    """Score an outside system's run like ``evaluate`` scores a retriever (RUN_SCHEMA rows).

    Re-ranking track: each candidate gets its score in the run; candidates the run does not list
    rank below every listed one (counted in ``doc_failures``). A query the run does not cover is
    a failure (nDCG 0, named). Full-corpus track: the run's ranking of all documents it lists,
    the query itself removed."""
    doc_ids = bench.documents["id"].to_list()
    doc_row = {d: i for i, d in enumerate(doc_ids)}
    rows = []
    for qid, cands, rel, domains in bench.queries.select(
        "id", "candidates", "relevance_scores", "domains"
    ).iter_rows():
        row = {"query_id": qid, "domains": domains, "setting": setting, "failed": False,
               "error": None, "latency_ms": None, "doc_failures": 0}  # fmt: skip
        ranked = run.get(qid)
        if not ranked:
            rows.append(row | failed("the run has no ranking for this query"))
            continue
        listed = [ranked.get(doc_ids[c]) for c in cands]
        floor = min((s for s in listed if s is not None), default=0.0) - 1.0
        scores = np.array([floor if s is None else s for s in listed], dtype=np.float64)
        row["doc_failures"] = sum(s is None for s in listed)
        row |= candidate_metrics(scores, rel, k)
        if full_corpus:
            order = sorted(
                (d for d in ranked if d in doc_row and d != qid), key=lambda d: (-ranked[d], d)
            )
            row |= full_corpus_metrics([doc_row[d] for d in order], cands, rel, k)
        rows.append(row)
    return pl.DataFrame(rows, schema=RUN_SCHEMA)
