"""Outside runs scored like our own: a TREC run file from any system (``saber evaluate-run``),
read (a line that cannot be trusted refused with its number), its tags mapped to settings, and
scored with the leaderboard's metric and CIs. Apart from `trec.py`, the runs stage's
writer, so that a change here moves no run's code version."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark, BenchmarkFormatError
from saber_assets.benchmark.texts import SETTINGS
from saber_assets.runs.evaluate import (
    RUN_SCHEMA,
    candidate_metrics,
    failed,
    full_corpus_metrics,
)


def setting_of(tag: str, default: str | None) -> str | None:
    """The setting a run's tag names (``bm25-statement-full`` → statement-full), else ``default``."""
    return next((s for s in SETTINGS if tag == s or tag.endswith("-" + s)), default)


def runs_by_setting(
    runs: Mapping[str, Mapping], wanted: list[str] | None = None
) -> dict[str, tuple[str, Mapping]]:
    """{setting: (tag, run)}: each of a file's runs under the setting its tag names. A tag naming
    no setting takes the one ``wanted`` setting, else is refused; two tags for one setting are
    refused (scoring one and dropping the other would change a system's score without a word)."""
    default = wanted[0] if wanted and len(wanted) == 1 else None
    out: dict[str, tuple[str, Mapping]] = {}
    for tag, run in runs.items():
        setting = setting_of(tag, default)
        if setting is None:
            raise ValueError(
                f"run tag {tag!r} names no setting ({', '.join(SETTINGS)}): end the tag with one "
                "(e.g. mysystem-statement-full) or pass a single --setting"
            )
        if setting in out:
            raise ValueError(
                f"run tags {out[setting][0]!r} and {tag!r} both name the setting {setting}: "
                "one run per setting (split the file or rename a tag)"
            )
        out[setting] = (tag, run)
    return {s: v for s, v in out.items() if not wanted or s in wanted}


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
            row |= full_corpus_metrics([doc_row[d] for d in order], cands, rel, k, doc_ids)
        rows.append(row)
    return pl.DataFrame(rows, schema=RUN_SCHEMA)


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
            if not math.isfinite(value):
                raise BenchmarkFormatError(f"{path}: line {n}: score {score!r} is not finite")
            ranked = runs.setdefault(tag, {}).setdefault(qid, {})
            if doc in ranked:  # a later line must not replace a score: it could be the oracle's
                raise BenchmarkFormatError(
                    f"{path}: line {n}: {tag} lists query {qid!r} document {doc!r} twice"
                )
            ranked[doc] = value
    if not runs:
        raise BenchmarkFormatError(f"{path}: empty run file")
    return runs
