"""The benchmark exchange format (the published SABER-Math schema), Parquet.

queries.parquet   id, problem, solution, candidates (document row indices), relevance_scores
                  (floats in [0, 5], aligned with candidates), domains (list of domain names)
documents.parquet id, problem, solution
judgments.parquet optional: the tournament's judgments the grades were fitted to, query_id,
                  round, shown_first, shown_second, winner (document rows, as ``candidates``;
                  winner null where the judge's answer never parsed; optional swapped_winner,
                  the answer with the other shown first, and domain, the partition the query's
                  tournament ran in), so a reader can carry
                  the judge's noise into the leaderboard's intervals (``leaderboard/joint.py``)
manifest.json     where the benchmark came from: corpus version, judge backend, seeds, thresholds,
                  the domain list (optional: else the domains the queries name, in order of appearance)

``id`` is optional on both tables: the published SABER-Math has none (a document is its row, which
is what ``candidates`` points at). A missing ``id`` is derived from the row (``q{row}``,
``d{row}``) and said in the manifest's ``derived`` list, never required.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.outputs import folder_written_whole

QUERY_SCHEMA = {
    "id": pl.String,  # optional in files: derived from the row when absent
    "problem": pl.String,
    "solution": pl.String,
    "candidates": pl.List(pl.Int64),
    "relevance_scores": pl.List(pl.Float64),
    "domains": pl.List(pl.String),
}
DOC_SCHEMA = {"id": pl.String, "problem": pl.String, "solution": pl.String}
JUDGMENT_SCHEMA = {
    "query_id": pl.String,
    "round": pl.Int32,
    "shown_first": pl.Int64,
    "shown_second": pl.Int64,
    "winner": pl.Int64,
    "swapped_winner": pl.Int64,  # optional: the pair judged again, the other shown first
}
# what a built benchmark's judgments carry besides: the domain partition each was made in
EXPORTED_JUDGMENT_SCHEMA = {**JUDGMENT_SCHEMA, "domain": pl.String}
OPTIONAL_JUDGMENT_COLUMNS = ("swapped_winner", "domain")


class BenchmarkFormatError(ValueError):
    """The files do not follow the exchange format; the message names file, row and field."""


ID_PREFIX = {"queries": "q", "documents": "d"}
_READ: dict[Path, tuple[tuple, Benchmark]] = {}  # Benchmark.read_kept


@dataclass
class Benchmark:
    queries: pl.DataFrame
    documents: pl.DataFrame
    manifest: dict = field(default_factory=dict)
    # where each table's rows came from, for error messages: [(file, rows), ...] in row order
    sources: dict[str, list[tuple[str, int]]] = field(default_factory=dict, repr=False)
    judgments: pl.DataFrame | None = field(default=None, repr=False)  # JUDGMENT_SCHEMA
    # document side -> (the documents table they were made of, its texts): texts.document_texts
    texts_memo: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("queries", "documents"):
            frame = getattr(self, name)
            if "id" in frame.columns:
                continue
            prefix = ID_PREFIX[name]
            ids = pl.Series("id", [f"{prefix}{i}" for i in range(frame.height)], dtype=pl.String)
            setattr(self, name, frame.insert_column(0, ids))
            note = f"{name}.id: not in the files, derived from the row number ({prefix}0, {prefix}1, ...)"
            derived = self.manifest.setdefault("derived", [])
            if note not in derived:
                derived.append(note)

    def locate(self, table: str, row: int, where: str) -> str:
        """``FILE: row N`` of a table's row (the file it was read from, its row within it)."""
        for path, n in self.sources.get(table, []):
            if row < n:
                return f"{path}: row {row}"
            row -= n
        return f"{where}: {table} row {row}"

    def relevance(self) -> dict[str, list[float]]:
        """Query id -> its candidates' grades, in candidate order."""
        q = self.queries
        return dict(zip(q["id"].to_list(), q["relevance_scores"].to_list(), strict=True))

    def failed_checks(self) -> list[str]:
        """The checks the manifest records as failed (``benchmark_export``'s ``checks``), each
        in words: a benchmark with one is not published unless that is asked for."""
        return failed_check_lines(self.manifest.get("checks"))

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
        """The bundle into ``directory``, whole: written into a staging folder and swapped in,
        so a failure (a full disk) leaves the old bundle as it was, never new queries beside old
        documents; the manifest lists each file's size and sha256 (``BUNDLE_FILES``), which
        ``read`` checks. A folder holding anything else is refused, never replaced."""
        directory = Path(directory)
        if directory.is_dir():
            other = sorted(p.name for p in directory.iterdir() if p.name not in BUNDLE_NAMES)
            if other:
                raise BenchmarkFormatError(
                    f"{directory} holds {other[:5]} besides a benchmark: not overwritten (write "
                    "the benchmark into a folder of its own)"
                )
        with folder_written_whole(directory) as staging:
            tables = [(self.queries, QUERIES), (self.documents, DOCUMENTS)]
            if self.judgments is not None:  # a rewrite without judgments drops an older one's
                tables.append((self.judgments, JUDGMENTS))
            for frame, name in tables:
                frame.write_parquet(staging / name)
            files = {name: file_facts(staging / name) for _, name in tables}
            manifest = {**self.manifest, BUNDLE_FILES: files}
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
        return directory

    @classmethod
    def read_kept(cls, directory: Path) -> Benchmark:
        """``read``, once per process while the directory's files are unchanged: the runs stage
        reads the same benchmark in every retriever's every domain (1.3 s a read at 283K
        documents, and each read made the documents' texts again). Each call returns its own
        shallow copy (tables are immutable; attributes set on it stay on it), sharing the texts
        made of its documents (``texts.document_texts``)."""
        directory = Path(directory).resolve()
        files = tuple(
            (f.name, st.st_ino, st.st_mtime_ns, st.st_size)
            for f in sorted(directory.iterdir())
            if f.is_file() and (st := f.stat())
        )
        kept = _READ.get(directory)
        if kept is None or kept[0] != files:
            _READ.clear()  # one benchmark at a time: its documents are the memory
            kept = _READ[directory] = (files, cls.read(directory))
        return replace(kept[1])

    @classmethod
    def read(cls, directory: Path) -> Benchmark:
        directory = Path(directory)
        for name in (QUERIES, DOCUMENTS):
            if not (directory / name).exists():
                raise BenchmarkFormatError(f"{directory}: missing {name}")
        manifest_path = directory / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        except ValueError as exc:
            raise BenchmarkFormatError(f"{manifest_path}: not JSON: {exc}") from None
        if not isinstance(manifest, dict):
            raise BenchmarkFormatError(f"{manifest_path}: not a JSON object")
        # the bundle's facts, not the benchmark's own: checked before a file is parsed
        check_files(directory, manifest.pop(BUNDLE_FILES, None))
        try:
            queries = pl.read_parquet(directory / QUERIES)
            documents = pl.read_parquet(directory / DOCUMENTS)
        except Exception as exc:
            raise BenchmarkFormatError(f"{directory}: unreadable Parquet: {exc}") from None
        judgments = None
        if (directory / JUDGMENTS).exists():
            try:
                judgments = pl.read_parquet(directory / JUDGMENTS)
            except Exception as exc:
                raise BenchmarkFormatError(
                    f"{directory}: unreadable judgments.parquet: {exc}"
                ) from None
        bench = cls(queries, documents, manifest, judgments=judgments)
        bench.validate(str(directory))
        return bench

    def validate(self, where: str = "benchmark") -> None:
        for frame, schema, name in (
            (self.queries, QUERY_SCHEMA, "queries"),
            (self.documents, DOC_SCHEMA, "documents"),
        ):
            missing = [c for c in schema if c not in frame.columns and c != "id"]
            if missing:
                files = self.sources.get(name)
                label = f"{files[0][0]}:" if files else f"{where}: {name}.parquet"
                raise BenchmarkFormatError(f"{label} lacks columns {missing}")
        q = self.queries
        n_docs = self.documents.height
        for frame, name in ((self.queries, "queries"), (self.documents, "documents")):
            self._check_ids_and_texts(frame, name, where)
        if self.judgments is not None:
            self._check_judgments(where)
        sourced = bool(self.sources.get("queries"))
        for row, (qid, cands, scores) in enumerate(
            q.select("id", "candidates", "relevance_scores").iter_rows()
        ):
            if sourced:  # files read from a snapshot: the file, and the row within it
                here = f"{self.locate('queries', row, where)} (query {qid!r})"
            else:
                here = f"{where}: query {qid!r} (row {row})"
            for fname, value in (("candidates", cands), ("relevance_scores", scores)):
                if value is None:
                    raise BenchmarkFormatError(f"{here}: field {fname!r} is null")
            if len(cands) != len(scores):
                raise BenchmarkFormatError(
                    f"{here}: {len(cands)} candidates but {len(scores)} relevance scores"
                )
            bad = [c for c in cands if c is None or not 0 <= c < n_docs]
            if bad:
                raise BenchmarkFormatError(
                    f"{here}: candidates holds document indices outside [0, {n_docs}): {bad[:5]}"
                )
            arr = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
            not_finite = np.nonzero(~np.isfinite(arr))[0]
            if not_finite.size:
                k = int(not_finite[0])
                raise BenchmarkFormatError(
                    f"{here}: relevance_scores[{k}] = {scores[k]!r} is not a finite number"
                )
            out_of_range = np.nonzero((arr < 0) | (arr > 5))[0]
            if out_of_range.size:
                k = int(out_of_range[0])
                raise BenchmarkFormatError(
                    f"{here}: relevance_scores[{k}] = {float(arr[k])!r} "
                    f"(candidate {cands[k]}) lies outside [0, 5] ({out_of_range.size} such values)"
                )
            if len(set(cands)) != len(cands):
                dup = next(c for c in cands if cands.count(c) > 1)
                raise BenchmarkFormatError(
                    f"{here}: candidates lists document {dup} more than once"
                )

    def _check_judgments(self, where: str) -> None:
        """Every judgment names a query of the benchmark, two of its candidates, and a winner
        among the two (or none)."""
        j = self.judgments
        missing = [
            c for c in JUDGMENT_SCHEMA if c not in j.columns and c not in OPTIONAL_JUDGMENT_COLUMNS
        ]
        if missing:
            raise BenchmarkFormatError(f"{where}: judgments.parquet lacks columns {missing}")
        cands = self.queries.select(pl.col("id").alias("query_id"), "candidates")
        known = j.with_row_index("row").join(cands, on="query_id", how="left")
        bad = known.filter(
            pl.col("candidates").is_null()
            | ~pl.col("candidates").list.contains(pl.col("shown_first"))
            | ~pl.col("candidates").list.contains(pl.col("shown_second"))
            | (pl.col("shown_first") == pl.col("shown_second"))
            | pl.any_horizontal(
                pl.col(w).is_not_null()
                & (pl.col(w) != pl.col("shown_first"))
                & (pl.col(w) != pl.col("shown_second"))
                for w in ("winner", "swapped_winner")
                if w in j.columns
            )
        )
        if bad.height:
            r = bad.row(0, named=True)
            raise BenchmarkFormatError(
                f"{where}: judgments.parquet row {r['row']} (query {r['query_id']!r}: "
                f"{r['shown_first']} vs {r['shown_second']}, winner {r['winner']}) names a query, "
                f"candidate or winner the queries do not hold ({bad.height} such rows)"
            )

    def _check_ids_and_texts(self, frame: pl.DataFrame, name: str, where: str) -> None:
        """One row per id, ids a TREC file can carry, and a problem text on every row: a
        duplicated query id would be scored once and its other rows dropped without a word."""
        ids = frame["id"].cast(pl.String)
        rows = pl.DataFrame({"id": ids, "row": range(frame.height)})
        dup = rows.filter(pl.col("id").is_duplicated())
        if dup.height:
            first = dup["id"][0]
            at = dup.filter(pl.col("id") == first)["row"].to_list()
            raise BenchmarkFormatError(
                f"{self.locate(name, at[1], where)}: {name}.parquet field 'id' repeats {first!r} "
                f"(rows {at[:5]}); {dup['id'].n_unique()} ids are not unique"
            )
        for row, value in enumerate(ids.to_list()):
            if value is None or not value.strip() or re.search(r"[\s\x00-\x1f]", value):
                raise BenchmarkFormatError(
                    f"{self.locate(name, row, where)}: {name}.parquet field 'id' is {value!r}: "
                    "ids must be non-empty with no whitespace (TREC files are split on it)"
                )

        def refuse(rows: pl.Series, column: str, what) -> None:
            """The first of ``rows`` (indices) refused: its file and row, what is wrong."""
            if rows.len():
                row = int(rows[0])
                raise BenchmarkFormatError(
                    f"{self.locate(name, row, where)}: {name}.parquet field {column!r} "
                    f"{what(row)} (id {ids[row]!r}; {rows.len()} such rows)"
                )

        texts = frame["problem"]
        empty = (texts.is_null() | (texts.cast(pl.String).str.strip_chars() == "")).arg_true()
        refuse(empty, "problem", lambda row: f"is {'null' if texts[row] is None else 'empty'}")
        for column in ("problem", "solution"):
            if column in frame.columns:
                long = (frame[column].cast(pl.String).str.len_chars() > MAX_TEXT_CHARS).arg_true()
                refuse(long, column, lambda row, c=column: (
                    f"has {len(frame[c][row]):,} characters, past {MAX_TEXT_CHARS:,}"))  # fmt: skip


QUERIES, DOCUMENTS, JUDGMENTS, MANIFEST = (
    "queries.parquet", "documents.parquet", "judgments.parquet", "manifest.json",
)  # fmt: skip
BUNDLE_NAMES = frozenset({QUERIES, DOCUMENTS, JUDGMENTS, MANIFEST})
BUNDLE_FILES = "files"  # the manifest's key: each file's bytes and sha256


def failed_check_lines(checks: list | None) -> list[str]:
    """Each failed check of a manifest's ``checks`` in words: check (domain): why."""
    return [
        f"{c.get('check')} ({c.get('domain')}): {c.get('description')}"
        for c in checks or []
        if isinstance(c, dict) and c.get("passed") is False
    ]


def verification_line(manifest: dict) -> str:
    """The manifest's verification verdict in one sentence, as the card, the report and the
    explorer's header say it (``saber verify``, recorded by the build's last leaderboard step)."""
    v = manifest.get("verification")
    if not isinstance(v, dict) or "passed" not in v:
        return "Not verified: no `saber verify` verdict is recorded for these numbers."
    checked = v.get("checked") if isinstance(v.get("checked"), dict) else {}
    total = sum(n for n in checked.values() if isinstance(n, int))
    lines = v.get("not_checked") if isinstance(v.get("not_checked"), list) else []
    names = list(dict.fromkeys(str(line).split(":", 1)[0] for line in lines))
    unchecked = f" Not checked: {', '.join(names)}." if names else ""
    if v["passed"] is True:
        return (
            f"Verified: {total:,} published numbers recomputed from the benchmark's own files "
            f"(`saber verify`), all agree.{unchecked}"
        )
    if v.get("differences") == 0:
        return f"NOT verified: {total:,} published numbers agree, but some could not be checked.{unchecked}"  # noqa: E501
    return (
        f"NOT verified: {v.get('differences', '?')} of {total:,} published numbers differ from "
        f"what the benchmark's own files give (`saber verify`).{unchecked}"
    )


def file_facts(path: Path) -> dict:
    """A file's size and sha256, as a bundle's manifest lists them."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def check_files(directory: Path, listed: dict | None) -> None:
    """Refuse a bundle whose files are not those its manifest lists (``listed``: name ->
    bytes and sha256), naming the file: a torn or edited folder is never read as a
    benchmark. A folder whose manifest lists none (written elsewhere) is read as it is."""
    if listed is None:
        return
    if not isinstance(listed, dict):
        raise BenchmarkFormatError(f"{directory}: manifest.json's {BUNDLE_FILES!r} is no map")
    foreign = sorted(str(name)[:80] for name in listed if name not in BUNDLE_NAMES - {MANIFEST})
    if foreign:  # a name from the file never becomes a path outside the bundle's own
        raise BenchmarkFormatError(
            f"{directory}: manifest.json lists {foreign[0]!r}, not a file of a benchmark"
        )
    present = {p.name for p in directory.iterdir() if p.name in BUNDLE_NAMES} - {MANIFEST}
    unlisted = sorted(present - set(listed))
    if unlisted:
        raise BenchmarkFormatError(
            f"{directory}/{unlisted[0]}: not in the manifest's files: another write's, refused"
        )
    for name, want in sorted(listed.items()):
        path = directory / name
        if not path.is_file():
            raise BenchmarkFormatError(f"{path}: listed in the manifest, missing")
        got = file_facts(path)
        if not isinstance(want, dict) or got != {k: want.get(k) for k in got}:
            raise BenchmarkFormatError(
                f"{path}: {got['bytes']:,} bytes, sha256 {got['sha256'][:12]}…, but the "
                f"manifest lists {want}: the bundle is torn or was edited, refused"
            )


# a text no corpus holds (the corpus's own caps are 20,000 and 50,000 characters by default):
# every page, prompt and index would carry it
MAX_TEXT_CHARS = 1_000_000


def best_rated(candidates: Sequence, relevance: Sequence[float], top: int = 5) -> list:
    """A query's ``top`` highest-rated candidates, best first (ties: the earlier listed first)."""
    return [candidates[i] for i in np.argsort(-np.asarray(relevance), kind="stable")[:top]]
