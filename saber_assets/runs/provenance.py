"""Where a leaderboard row came from, and a stable id for it.

Every row carries: the model id and its resolved revision (an API model: its name and the date it
was asked), the backend, a hash of the input envelope (prompts, the long-text rule), a hash of
the retriever's registry entry, the benchmark's id (its Hub revisions, or its content) and the
code version (a hash of the scoring code, as the assets' code versions use: an image has no
git). ``row_id`` is a short hash of those fields and the setting: the same system on the same
benchmark with the same code gets the same id anywhere, and ``saber evaluate --reproduce ROW_ID``
reruns exactly that row.
"""

from __future__ import annotations

import hashlib
import json

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.retrievers.entries import RetrieverEntry
from saber_assets.retrievers.registry import model_of
from saber_assets.versions import code_digest

# the code a leaderboard row's numbers come from: the retriever kinds (through the registry that
# builds them) and the evaluation, with everything they import (``versions.code_digest``)
SCORING_CODE = (
    "saber_assets.retrievers.registry",
    "saber_assets.runs.evaluate",
)
PROVENANCE_COLUMNS = [
    "row_id",
    "model_id",
    "model_revision",
    "backend",
    "envelope_hash",
    "config_hash",
    "benchmark_id",
    "code_version",
]
# the parts of an entry that change its scores (not its name, description, meta or opt-in flag)
_SCORING_FIELDS = {"kind", "params", "settings", "full_corpus"}
_ENVELOPE = ("query_prompt", "doc_prompt", "long_text")


def short_hash(obj) -> str:
    data = json.dumps(obj, sort_keys=True, default=str, separators=(",", ":")).encode()
    return hashlib.blake2b(data, digest_size=6).hexdigest()


def benchmark_id(bench: Benchmark) -> str:
    """The Hub revisions a pulled benchmark records, else its name and a hash of its content
    (texts, candidates, grades): two copies of one benchmark share it, a changed grade does not."""
    if bench.manifest.get("benchmark_id"):
        return str(bench.manifest["benchmark_id"])
    h = hashlib.blake2b(digest_size=8)
    for frame, cols in (
        (bench.documents, ["id", "problem", "solution"]),
        (bench.queries, ["id", "problem", "solution", "candidates", "relevance_scores", "domains"]),
    ):
        for row in frame.select(cols).iter_rows():
            h.update(json.dumps(row, default=str, separators=(",", ":")).encode())
            h.update(b"\n")
    return f"{bench.manifest.get('name', 'benchmark')}@{h.hexdigest()}"


def provenance(entry: RetrieverEntry, bench_id: str, code: str | None = None) -> dict:
    """The provenance fields of an entry's rows (``row_id`` needs the setting: ``with_row_ids``)."""
    model, revision, backend = model_of(entry)
    envelope = {k: entry.params.get(k, "") for k in _ENVELOPE}
    return {
        "model_id": model,
        "model_revision": revision,
        "backend": backend,
        "envelope_hash": short_hash(envelope),
        "config_hash": short_hash(entry.model_dump(include=_SCORING_FIELDS)),
        "benchmark_id": bench_id,
        "code_version": code or code_digest(SCORING_CODE),
    }


def row_id(fields: dict, retriever: str, setting: str) -> str:
    """The short hash of a row's provenance, its retriever and its setting. An API model's date
    is left out: the same API model asked on another day is the same row, re-asked."""
    keep = {k: v for k, v in fields.items() if k in PROVENANCE_COLUMNS and k != "row_id"}
    if str(keep.get("model_revision", "")).startswith("api:"):
        keep["model_revision"] = "api"
    return short_hash({**keep, "retriever": retriever, "setting": setting})


def with_provenance(report: pl.DataFrame, retriever: str, fields: dict) -> pl.DataFrame:
    """A retriever's report rows (one per setting) with its provenance columns and row ids."""
    ids = [row_id(fields, retriever, s) for s in report["setting"].to_list()]
    extra = [pl.lit(fields[c], dtype=pl.String).alias(c) for c in PROVENANCE_COLUMNS[1:]]
    return report.with_columns(pl.Series("row_id", ids, dtype=pl.String), *extra)
