"""The stored per-query runs (``<outputs>/runs/<retriever>/<domain>.parquet``, written by the runs
stage beside its TREC files), read in one place: the leaderboard, the analyses and the explorer
all read them through ``stored_runs``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl

FULL_CORPUS = "full-corpus"  # a retriever's folder for its full-corpus top k, as TREC runs


def trec_name(domain_key: str, setting: str) -> str:
    """A TREC run file's name, ``DOMAIN.SETTING.trec``: the candidates' run in a retriever's
    folder, its full-corpus top k in that folder's ``FULL_CORPUS``."""
    return f"{domain_key}.{setting}.trec"


def run_file_parts(path: Path) -> tuple[str, str]:
    """(domain key, setting) of a TREC run file, ``trec_name``'s parts."""
    domain_key, setting = path.name[: -len(".trec")].rsplit(".", 1)
    return domain_key, setting


def trec_files(runs_dir: Path, sub: str = "") -> dict[str, list[Path]]:
    """retriever -> its TREC run files (``RETRIEVER/DOMAIN.SETTING.trec``; ``sub``: those in
    that folder of each retriever's, e.g. ``FULL_CORPUS``), links left out."""
    out: dict[str, list[Path]] = {}
    if not Path(runs_dir).is_dir():
        return out
    for folder in sorted(p for p in Path(runs_dir).iterdir() if p.is_dir() and not p.is_symlink()):
        where = folder / sub if sub else folder
        if not where.is_dir() or where.is_symlink():
            continue
        files = sorted(f for f in where.glob("*.trec") if f.is_file() and not f.is_symlink())
        if files:
            out[folder.name] = files
    return out


def run_files(runs_dir: Path, retriever: str) -> list[Path]:
    """One retriever's per-domain run files, in name order ([] where it has none yet)."""
    return sorted((Path(runs_dir) / retriever).glob("*.parquet"))


def stored_runs(
    runs_dir: Path,
    retrievers: Iterable[str] | None = None,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """The runs of ``retrievers`` (every retriever with files when None), with a ``retriever``
    column; ``columns``: read only those. A domain's file written before a column was added
    still reads (its missing columns are null)."""
    if retrievers is not None:
        names = list(retrievers)
    elif Path(runs_dir).is_dir():
        names = sorted(p.name for p in Path(runs_dir).iterdir() if p.is_dir())
    else:
        names = []
    frames = []
    for name in names:
        files = run_files(runs_dir, name)
        if not files:
            continue
        parts = [pl.read_parquet(f, columns=list(columns) if columns else None) for f in files]
        runs = pl.concat(parts, how="diagonal_relaxed")
        frames.append(runs.with_columns(pl.lit(name).alias("retriever")))
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
