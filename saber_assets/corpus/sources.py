"""Read declared corpus sources into raw records; rows that cannot be read become quarantine rows.

A configuration mistake (missing file, a mapped field absent from the file) is an error that names
the file and line. A bad row (not UTF-8, not JSON, missing a field) is quarantined with its reason;
the rest of the file is still read.
"""

from __future__ import annotations

import gzip
import json
import zlib
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
        data = data[: 4 * n].decode("utf-8", errors="replace")
    return storable(data[:n])


def storable(text: str) -> str:
    """``text`` as valid Unicode: a lone surrogate (JSON may spell one, ``"\\ud800"``; no file
    or table can store it) written as its escape, so a quarantine row can show it."""
    return text.encode("utf-8", errors="backslashreplace").decode("utf-8")


def bounded_lines(path: Path, cap: int) -> Iterator[tuple[bytes, int]]:
    """Each line of a JSON-lines file (decompressed where it is ``.gz``) and its length in
    bytes; a line longer than ``cap`` comes as its first ``cap + 1`` bytes, the rest read past in
    chunks, never held (a 4 KiB sparse file of one 512 MiB line held all of it before)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        while line := f.readline(cap + 1):
            size = len(line)
            if size > cap and not line.endswith(b"\n"):
                while more := f.readline(1 << 20):
                    size += len(more)
                    if more.endswith(b"\n"):
                        break
            yield line, size


def _open_lines(path: Path, cap: int) -> Iterator[tuple[bytes, int]]:
    """``bounded_lines``, a damaged ``.gz`` refused by name (it used to end the read early)."""
    try:
        yield from bounded_lines(path, cap)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise CorpusSourceError(f"{path}: a damaged gzip stream: {exc}") from None


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
    for lineno, (raw, size) in enumerate(_open_lines(path, MAX_LINE_BYTES), start=1):
        if size > MAX_LINE_BYTES:  # before anything else: the line was never held whole
            reason = f"line has {size:,} bytes (cap {MAX_LINE_BYTES:,})"
            yield Rejected(name, lineno, None, reason, _excerpt(raw))
            continue
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = f"not valid UTF-8 at byte {exc.start} of the line"
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
        if (footer := parquet_footer_bytes(path)) > MAX_FOOTER_BYTES:
            raise CorpusSourceError(
                f"source {name!r}: {path}: Parquet metadata of {footer:,} bytes (cap "
                f"{MAX_FOOTER_BYTES:,}; statistics of a huge value?): not read"
            )
        try:
            file = pq.ParquetFile(path)
        except Exception as exc:
            raise CorpusSourceError(
                f"source {name!r}: cannot read Parquet file {path}: {exc}"
            ) from None
        _check_mapping(name, path, i + 1, mapping, file.schema_arrow.names)
        for group in range(file.metadata.num_row_groups):
            rows = file.metadata.row_group(group).num_rows
            if reason := row_group_too_large(file.metadata.row_group(group)):
                # its sizes are in the metadata: refused unread, its rows counted on
                yield Rejected(name, i + 1, None, f"row group {group} of {path.name}: {reason}")
                i += rows
                continue
            for batch in file.iter_batches(batch_size=8192, row_groups=[group]):
                for record in batch.to_pylist():
                    if mapping["id"] == ROW_NUMBER:
                        record[ROW_NUMBER] = i  # the published row index, 0-based
                    i += 1
                    yield RawRow(name, i, record)


MAX_FOOTER_BYTES = 64 * 2**20  # a Parquet file's metadata; a dataset shard's is kilobytes


def parquet_footer_bytes(path: Path) -> int:
    """The length of a Parquet file's metadata, from its last 8 bytes (0 when it has none)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() < 12:
            return 0
        f.seek(-8, 2)
        tail = f.read(8)
    return int.from_bytes(tail[:4], "little") if tail[4:] == b"PAR1" else 0


# a row group is read whole: its uncompressed size (from the file's metadata) is what reading
# it holds; a row is a problem, so a group whose rows average over a line's cap holds at least
# one that is not (a 10 KiB file held a 300 MiB string)
MAX_ROW_GROUP_BYTES = 1 << 30


def row_group_too_large(group: pq.RowGroupMetaData) -> str:
    """Why a Parquet row group is not read (its sizes in the metadata), or ''."""
    size = max(
        group.total_byte_size,
        sum(group.column(c).total_uncompressed_size for c in range(group.num_columns)),
    )
    if size > MAX_ROW_GROUP_BYTES:
        return f"{size:,} bytes uncompressed (cap {MAX_ROW_GROUP_BYTES:,}): not read"
    if size > max(group.num_rows, 1) * MAX_LINE_BYTES:
        return (
            f"{size:,} bytes for {group.num_rows:,} rows, more than {MAX_LINE_BYTES:,} a row "
            "(a row holds one problem): not read"
        )
    return ""


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
