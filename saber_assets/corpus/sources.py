"""Read declared corpus sources into raw records; rows that cannot be read become quarantine rows.

A configuration mistake (missing file, a mapped field absent from the file) is an error that names
the file and line. A bad row (not UTF-8, not JSON, missing a field) is quarantined with its reason;
the rest of the file is still read.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from saber_assets.config import ROW_NUMBER, CorpusConfig


class CorpusSourceError(ValueError):
    """A source cannot be read at all (configuration error); the message names file and line."""


@dataclass
class RawRow:
    source: str
    line: int  # 1-based line (JSONL) or row number (Parquet)
    record: dict[str, Any]


@dataclass
class Rejected:
    source: str
    line: int
    native_id: str | None
    reason: str
    excerpt: str = ""


@dataclass
class SourceRead:
    rows: list[RawRow] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


def _excerpt(data: bytes | str, n: int = 200) -> str:
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    return storable(data[:n])


def storable(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (JSON may spell one, ``"\\ud800"``; no file
    or table can store it) written as its escape, so a quarantine row can show it."""
    return text.encode("utf-8", errors="backslashreplace").decode("utf-8")


def _open_lines(path: Path) -> Iterator[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        yield from f


def read_source(name: str, path: Path, mapping: dict[str, str]) -> SourceRead:
    """Read one JSONL(.gz) or Parquet file; check that the mapped fields exist."""
    out = SourceRead()
    for row in iter_source(name, path, mapping):
        (out.rows if isinstance(row, RawRow) else out.rejected).append(row)
    return out


def missing_sources(cfg: CorpusConfig) -> list[str]:
    """One line per declared source whose file is not there, with where to get it."""
    return [
        f"source {s.name!r}: {s.file()} is not there"
        + (f"; get it: {s.obtain}" if s.obtain else "")
        for s in cfg.sources
        if not s.file().exists()
    ]


# one line is one problem: anything near this is not one, and is not read into memory as one
MAX_LINE_BYTES = 16 * 1024 * 1024

JSON_LINES = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson")


def readable(path: Path) -> bool:
    """A file type the corpus reader opens: Parquet or JSON lines (optionally gzipped)."""
    return path.suffix == ".parquet" or "".join(path.suffixes[-2:]).endswith(JSON_LINES)


# a pulled benchmark's documents (`saber pull`), read as a source in their row order
PULLED_DOCUMENTS = "documents.parquet"


def snapshot_shards(folder: Path, split: str = "train") -> list[Path]:
    """The Parquet shards of a Hugging Face dataset folder as ``snapshot_download`` leaves it
    (``data/{split}-*.parquet``), in shard order."""
    return sorted((Path(folder) / "data").glob(f"{split}-*.parquet"))


def dataset_shards(folder: Path, split: str = "train") -> list[Path]:
    """A dataset snapshot's shards (``snapshot_shards``), else a ``saber pull`` folder's
    documents; [] when it holds neither."""
    shards = snapshot_shards(folder, split)
    if not shards and (folder / PULLED_DOCUMENTS).is_file():
        shards = [folder / PULLED_DOCUMENTS]
    return shards


def iter_source(name: str, path: Path, mapping: dict[str, str]) -> Iterator[RawRow | Rejected]:
    """The rows of one JSONL(.gz) or Parquet file, streamed (a Parquet file batch by batch), each
    read or rejected with its reason; the mapped fields are checked on the first row."""
    if not path.exists():
        raise CorpusSourceError(f"source {name!r}: file not found: {path}")
    if path.is_dir():
        shards = dataset_shards(path)
        if not shards:
            raise CorpusSourceError(
                f"source {name!r}: {path} is a folder without data/train-*.parquet (a dataset "
                f"folder as snapshot_download leaves it) or {PULLED_DOCUMENTS} (saber pull)"
            )
        yield from _iter_parquet(name, shards, mapping)
        return
    if not readable(path):
        raise CorpusSourceError(
            f"source {name!r}: unsupported file type {path.name!r} (use .jsonl, .jsonl.gz or .parquet)"
        )
    if path.suffix == ".parquet":
        yield from _iter_parquet(name, [path], mapping)
        return
    checked = False
    for lineno, raw in enumerate(_open_lines(path), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"not valid UTF-8 at byte {exc.start} of the line"
            yield Rejected(name, lineno, None, reason, _excerpt(raw))
            continue
        if len(raw) > MAX_LINE_BYTES:
            reason = f"line has {len(raw):,} bytes (cap {MAX_LINE_BYTES:,})"
            yield Rejected(name, lineno, None, reason, _excerpt(raw))
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            reason = f"invalid JSON: {exc.msg} (column {exc.colno})"
            yield Rejected(name, lineno, None, reason, _excerpt(text))
            continue
        except Exception as exc:  # e.g. RecursionError on a value nested 100,000 deep
            reason = f"cannot be parsed: {type(exc).__name__}: {str(exc)[:120]}"
            yield Rejected(name, lineno, None, reason, _excerpt(text))
            continue
        if not isinstance(record, dict):
            reason = f"JSON value is a {type(record).__name__}, not an object"
            yield Rejected(name, lineno, None, reason, _excerpt(text))
            continue
        if not checked:
            _check_mapping(name, path, lineno, mapping, record.keys())
            checked = True
        if mapping["id"] == ROW_NUMBER:
            record[ROW_NUMBER] = lineno - 1
        yield RawRow(name, lineno, record)


def _iter_parquet(name: str, paths: list[Path], mapping: dict[str, str]) -> Iterator[RawRow]:
    """The rows of Parquet shards read as one table, in order (``line`` runs on across them)."""
    i = 0
    for path in paths:
        try:
            file = pq.ParquetFile(path)
        except Exception as exc:
            raise CorpusSourceError(
                f"source {name!r}: cannot read Parquet file {path}: {exc}"
            ) from None
        _check_mapping(name, path, i + 1, mapping, file.schema_arrow.names)
        for batch in file.iter_batches(batch_size=8192):
            for record in batch.to_pylist():
                if mapping["id"] == ROW_NUMBER:
                    record[ROW_NUMBER] = i  # the published row index, 0-based
                i += 1
                yield RawRow(name, i, record)


def _check_mapping(name: str, path: Path, line: int, mapping: dict[str, str], present) -> None:
    present = list(present)
    # `category` is optional; id/problem/solution must exist in the file (an id of `#row` is
    # the row's position, not a field)
    missing = [
        f"{role}={col!r}"
        for role, col in mapping.items()
        if col not in present and role != "category" and col != ROW_NUMBER
    ]
    if missing:
        raise CorpusSourceError(
            f"source {name!r}: {path}:{line}: field mapping {', '.join(missing)} not found; "
            f"fields present: {sorted(present)}"
        )
