"""The benchmark exchange format (the published SABER-Math schema), Parquet.

queries.parquet   id, problem, solution, candidates (document row indices), relevance_scores
                  (floats in [0, 5], aligned with candidates), domains (list of domain names)
documents.parquet id, problem, solution
manifest.json     where the benchmark came from: corpus version, judge backend, seeds, thresholds,
                  the domain list (optional: else the domains the queries name, in order of appearance)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

QUERY_SCHEMA = {
    "id": pl.String,
    "problem": pl.String,
    "solution": pl.String,
    "candidates": pl.List(pl.Int64),
    "relevance_scores": pl.List(pl.Float64),
    "domains": pl.List(pl.String),
}
DOC_SCHEMA = {"id": pl.String, "problem": pl.String, "solution": pl.String}


class BenchmarkFormatError(ValueError):
    """The files do not follow the exchange format; the message names file, row and field."""


@dataclass
class Benchmark:
    queries: pl.DataFrame
    documents: pl.DataFrame
    manifest: dict = field(default_factory=dict)

    def domain_list(self) -> list[str]:
        """The benchmark's domains: the manifest's list, else those its queries name."""
        named = self.manifest.get("domains")
        if named:
            return list(named)
        seen = (
            self.queries["domains"].explode().drop_nulls().to_list() if self.queries.height else []
        )
        return list(dict.fromkeys(seen))

    def write(self, directory: Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.queries.write_parquet(directory / "queries.parquet")
        self.documents.write_parquet(directory / "documents.parquet")
        (directory / "manifest.json").write_text(json.dumps(self.manifest, indent=2, default=str))
        return directory

    @classmethod
    def read(cls, directory: Path) -> Benchmark:
        directory = Path(directory)
        for name in ("queries.parquet", "documents.parquet"):
            if not (directory / name).exists():
                raise BenchmarkFormatError(f"{directory}: missing {name}")
        try:
            queries = pl.read_parquet(directory / "queries.parquet")
            documents = pl.read_parquet(directory / "documents.parquet")
        except Exception as exc:
            raise BenchmarkFormatError(f"{directory}: unreadable Parquet: {exc}") from None
        manifest_path = directory / "manifest.json"
        manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        bench = cls(queries, documents, manifest)
        bench.validate(str(directory))
        return bench

    def validate(self, where: str = "benchmark") -> None:
        for frame, schema, name in (
            (self.queries, QUERY_SCHEMA, "queries"),
            (self.documents, DOC_SCHEMA, "documents"),
        ):
            missing = [c for c in schema if c not in frame.columns]
            if missing:
                raise BenchmarkFormatError(f"{where}: {name}.parquet lacks columns {missing}")
        q = self.queries
        n_docs = self.documents.height
        dup_ids = self.documents.filter(pl.col("id").is_duplicated())["id"]
        if dup_ids.len():
            raise BenchmarkFormatError(
                f"{where}: documents.parquet: field 'id' has duplicate values, e.g. {dup_ids[0]!r}"
            )
        for row, (qid, cands, scores) in enumerate(
            q.select("id", "candidates", "relevance_scores").iter_rows()
        ):
            for fname, value in (("candidates", cands), ("relevance_scores", scores)):
                if value is None:
                    raise BenchmarkFormatError(
                        f"{where}: query {qid!r} (row {row}): field {fname!r} is null"
                    )
            if len(cands) != len(scores):
                raise BenchmarkFormatError(
                    f"{where}: query {qid!r} (row {row}): {len(cands)} candidates but {len(scores)} relevance scores"
                )
            bad = [c for c in cands if c is None or not 0 <= c < n_docs]
            if bad:
                raise BenchmarkFormatError(
                    f"{where}: query {qid!r} (row {row}): candidates holds document indices outside [0, {n_docs}): {bad[:5]}"
                )
            arr = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
            not_finite = np.nonzero(~np.isfinite(arr))[0]
            if not_finite.size:
                k = int(not_finite[0])
                raise BenchmarkFormatError(
                    f"{where}: query {qid!r} (row {row}): relevance_scores[{k}] = {scores[k]!r} is not a finite number"
                )
            out_of_range = np.nonzero((arr < 0) | (arr > 5))[0]
            if out_of_range.size:
                k = int(out_of_range[0])
                raise BenchmarkFormatError(
                    f"{where}: query {qid!r} (row {row}): relevance_scores[{k}] = {float(arr[k])!r} "
                    f"(candidate {cands[k]}) lies outside [0, 5] ({out_of_range.size} such values)"
                )
            if len(set(cands)) != len(cands):
                dup = next(c for c in cands if cands.count(c) > 1)
                raise BenchmarkFormatError(
                    f"{where}: query {qid!r} (row {row}): candidates lists document {dup} more than once"
                )
