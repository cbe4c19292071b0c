"""Outside runs scored like our own: a TREC run file from any system (``saber evaluate-run``),
read, its tags mapped to settings, and scored with the leaderboard's metric and CIs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark, BenchmarkFormatError
from saber_assets.benchmark.texts import SETTINGS
from saber_assets.leaderboard.evaluate import (
    RUN_SCHEMA,
    candidate_metrics,
    failed,
    full_corpus_metrics,
)


def write_run(path: Path, run: Mapping[str, Mapping[str, float]], tag: str) -> None:
    """``run`` ({qid: {docid: score}}) as a TREC run file that ``read_run`` reads back: queries in
    key order, each one's documents by score, highest first (ties in the order given), ranks
    from 1, the score as Python prints it. Written whole (no half file on a failure)."""
    from saber_assets.outputs import written_whole

    with written_whole(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for qid in sorted(run):
            ranked = sorted(run[qid].items(), key=lambda item: -item[1])
            f.writelines(
                f"{qid} Q0 {doc} {rank} {score!r} {tag}\n"
                for rank, (doc, score) in enumerate(ranked, 1)
            )


def read_run(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    """A TREC run file (qid Q0 docid rank score tag) as {tag: {qid: {docid: score}}}. A file may
    hold several runs (one per setting, told apart by their tag); a malformed line is an error
    naming it."""
    runs: dict[str, dict[str, dict[str, float]]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise BenchmarkFormatError(
                    f"{path}: line {n}: expected 'qid Q0 docid rank score tag', got {len(parts)} fields"
                )
            qid, _, doc, _, score, tag = parts
            try:
                value = float(score)
            except ValueError:
                raise BenchmarkFormatError(
                    f"{path}: line {n}: score {score!r} is not a number"
                ) from None
            runs.setdefault(tag, {}).setdefault(qid, {})[doc] = value
    if not runs:
        raise BenchmarkFormatError(f"{path}: empty run file")
    return runs


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
