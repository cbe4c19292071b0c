"""Corpus stage core: read every declared source, validate, sample, de-duplicate."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field

import polars as pl

from saber_assets.config import CorpusConfig, FieldCondition
from saber_assets.corpus.dedup import DedupItem, find_duplicates, minhash_config
from saber_assets.corpus.normalize import CorpusRow, validate_rows
from saber_assets.corpus.sources import (
    CorpusSourceError,
    RawRow,
    Rejected,
    missing_sources,
    read_source,
)

CORPUS_SCHEMA = {
    "id": pl.String,
    "source": pl.String,
    "native_id": pl.String,
    "line": pl.Int64,
    "problem": pl.String,
    "solution": pl.String,
    "n_solutions": pl.Int32,
    "category": pl.String,
    "priority": pl.Int32,
}
QUARANTINE_SCHEMA = {
    "source": pl.String,
    "line": pl.Int64,
    "native_id": pl.String,
    "reason": pl.String,
    "excerpt": pl.String,
}
DUPLICATES_SCHEMA = {"removed_id": pl.String, "kept_id": pl.String, "cluster": pl.Int64}


@dataclass
class CorpusBuild:
    corpus: pl.DataFrame
    quarantine: pl.DataFrame
    duplicates: pl.DataFrame
    per_source: pl.DataFrame
    seconds: dict[str, float] = field(default_factory=dict)


def sample_rows(rows: list[CorpusRow], size: int | None, seed: int) -> list[CorpusRow]:
    """Deterministic sample: the `size` rows with the smallest hash of (seed, id), in file order.

    Hash-based rather than RNG-based so that appending rows to a source never changes which of the
    old rows are in the sample beyond the displaced ones.
    """
    if size is None or size >= len(rows):
        return rows

    def key(r: CorpusRow) -> bytes:
        return hashlib.blake2b(f"{seed}:{r.id}".encode(), digest_size=8).digest()

    chosen = {r.id for r in sorted(rows, key=key)[:size]}
    return [r for r in rows if r.id in chosen]


def filter_rows(
    source: str, rows: list[RawRow], where: dict[str, FieldCondition]
) -> tuple[list[RawRow], dict[str, int]]:
    """The rows meeting every condition of ``where``, and how many each condition left out (a
    row counted by the first it fails). A field no row has is a configuration error."""
    if not where:
        return rows, {}
    seen = set().union(*(r.record.keys() for r in rows[:1000])) if rows else set()
    if rows and (absent := sorted(set(where) - seen)):
        raise CorpusSourceError(
            f"source {source!r}: `where` names {absent}, not fields of its rows "
            f"(fields: {sorted(seen)})"
        )
    conditions = [(f, c, f"{f} {c.describe()}") for f, c in where.items()]
    kept, left_out = [], dict.fromkeys((label for _, _, label in conditions), 0)
    for row in rows:
        failed = next((label for f, c, label in conditions if not c.holds(row.record.get(f))), None)
        if failed is None:
            kept.append(row)
        else:
            left_out[failed] += 1
    return kept, left_out


def build_corpus(cfg: CorpusConfig, seed: int) -> CorpusBuild:
    """Every declared source read, validated, sampled and de-duplicated; a source whose file is
    not there stops it before any is read, with where to get it."""
    if missing := missing_sources(cfg):
        raise CorpusSourceError("the corpus cannot be read yet:\n  " + "\n  ".join(missing))
    t0 = time.perf_counter()
    kept: list[tuple[CorpusRow, int, int]] = []  # row, priority, source order
    rejected: list[Rejected] = []
    stats = []
    for order, src in enumerate(cfg.sources):
        mapping = src.field_mapping()
        read = read_source(src.name, src.file(), mapping)
        selected, left_out = filter_rows(src.name, read.rows, src.where)
        rows, bad = validate_rows(selected, mapping, cfg.max_problem_chars, cfg.max_solution_chars)
        sampled = sample_rows(rows, src.sample_size, seed)
        rejected += read.rejected + bad
        kept += [(r, src.priority, order) for r in sampled]
        stats.append(
            {
                "source": src.name,
                "priority": src.priority,
                "rows_read": len(read.rows) + len(read.rejected),
                "filtered_out": sum(left_out.values()),
                "filtered_by": json.dumps(left_out) if left_out else "",
                "quarantined": len(read.rejected) + len(bad),
                "valid": len(rows),
                "sampled": len(sampled),
            }
        )
    t1 = time.perf_counter()
    d = cfg.dedup
    items = [DedupItem(r.id, r.problem, prio, order * 10**9 + r.line) for r, prio, order in kept]
    links = (
        find_duplicates(
            items, minhash_config(d.n_grams, d.num_buckets, d.hashes_per_bucket, d.seed)
        )
        if d.enabled
        else []
    )
    t2 = time.perf_counter()
    removed = {link.removed_id for link in links}
    corpus = pl.DataFrame(
        [asdict(r) | {"priority": prio} for r, prio, _ in kept if r.id not in removed],
        schema=CORPUS_SCHEMA,
    )
    duplicates = pl.DataFrame([asdict(x) for x in links], schema=DUPLICATES_SCHEMA)
    quarantine = pl.DataFrame([asdict(x) for x in rejected], schema=QUARANTINE_SCHEMA)
    removed_by_source = (
        duplicates.with_columns(pl.col("removed_id").str.split(":").list.first().alias("source"))
        .group_by("source")
        .len("duplicates_removed")
    )
    per_source = (
        pl.DataFrame(stats)
        .join(removed_by_source, on="source", how="left")
        .with_columns(pl.col("duplicates_removed").fill_null(0).cast(pl.Int64))
        .join(corpus.group_by("source").len("in_corpus"), on="source", how="left")
        .with_columns(pl.col("in_corpus").fill_null(0).cast(pl.Int64))
    )
    return CorpusBuild(
        corpus, quarantine, duplicates, per_source, {"read_validate": t1 - t0, "dedup": t2 - t1}
    )


def corpus_version(corpus: pl.DataFrame) -> str:
    """Content hash of the corpus rows, in order: later stages record which corpus they used."""
    h = hashlib.blake2b(digest_size=8)
    for row in corpus.select("id", "problem", "solution").iter_rows():
        h.update("\x1f".join(row).encode())
        h.update(b"\x1e")
    return h.hexdigest()
