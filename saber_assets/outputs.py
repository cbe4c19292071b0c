"""Where a config's outputs lie: one folder per config (<home>/<config name>) and, in it, every
folder that one stage writes and another stage or a command reads, named once. The assets reach
it through their pipeline resource (``pipeline.outputs()``), the commands through the config
(``Outputs.of(cfg)``): both mean the same folders."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from saber_assets.config import PipelineConfig, data_home


@dataclass(frozen=True)
class Outputs:
    root: Path

    @classmethod
    def of(cls, cfg: PipelineConfig, home: Path | None = None) -> Outputs:
        """A config's outputs under ``home`` (default: $SABER_HOME, else .saber/)."""
        home = Path(home or data_home())
        return cls(inside(home, cfg.name))

    @property
    def parquet(self) -> Path:
        """The IO manager's tables (one Parquet file, or folder of partitions, per asset)."""
        return self.root / "parquet"

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def stores(self) -> Path:
        """The DuckDB stores (LLM cache, judgments, embeddings) when they are not PostgreSQL."""
        return self.root / "stores.duckdb"

    @property
    def signals(self) -> Path:
        return self.root / "signals"

    @property
    def benchmark(self) -> Path:
        """The exported benchmark (exchange format)."""
        return self.root / "benchmark"

    @property
    def evaluation_benchmark(self) -> Path:
        """The benchmark the retrievers are scored on: the export, or a pulled one."""
        return self.root / "evaluation_benchmark"

    def scored_benchmark(self) -> Path:
        """The evaluation benchmark where it was made, else the export."""
        built = self.evaluation_benchmark
        return built if built.exists() else self.benchmark

    def benchmark_folder(self, given: str | os.PathLike | None, scored: bool = True) -> Path:
        """The benchmark a command reads: the folder given, else this build's (``scored``: the one
        the leaderboard scores, ``scored_benchmark``; else the export people label). A folder
        without a benchmark is refused by name."""
        path = Path(given) if given else (self.scored_benchmark() if scored else self.benchmark)
        if not (path / "queries.parquet").exists():
            raise FileNotFoundError(
                f"no benchmark at {path}: build it first (saber build) or pass --benchmark DIR"
            )
        return path

    @property
    def runs(self) -> Path:
        """Per retriever: one Parquet run per domain and TREC files per setting."""
        return self.root / "runs"

    def index(self, retriever: str) -> Path:
        return inside(self.root / "indexes", retriever)

    @property
    def token_tables(self) -> Path:
        """Document token tables every retriever of a tokenizer reads (beside the retrievers'
        folders: no retriever name starts with a dot)."""
        return self.root / "indexes" / ".tokens"

    @property
    def contamination(self) -> Path:
        """The contamination audit's files: one folder per training corpus, and the benchmark's
        own-candidate matches."""
        return self.root / "contamination"

    @property
    def leaderboard(self) -> Path:
        return self.root / "leaderboard"

    @property
    def human_study(self) -> Path:
        return self.root / "human_study"

    @property
    def report(self) -> Path:
        """The analyses' HTML report (``index.html`` and its figures)."""
        return self.root / "report"

    @property
    def explorer(self) -> Path:
        """The benchmark explorer: a static site (``index.html``, a page per query)."""
        return self.root / "explorer"

    @property
    def builds(self) -> Path:
        """Snapshots of the last builds the explorer showed (``site/build_diff.py``): what
        its "What changed" page compares the current build with."""
        return self.root / "builds"


def inside(base: Path, name: str) -> Path:
    """``base / name``, refused unless it resolves to a folder strictly under ``base``: a name from
    a config or a registry never reaches outside the home (``..``, an absolute path, a link)."""
    path = (base / name).resolve()
    if not name or path == base.resolve() or not path.is_relative_to(base.resolve()):
        raise ValueError(f"{name!r} would write outside {base}: refused")
    return base / name


def unique_sibling(path: Path, kind: str) -> Path:
    """A name beside ``path`` that no other writer picks: ``<name>.<pid>.<random>.<kind>``."""
    return path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(6)}.{kind}")


def own_folder(path: Path, kind: str) -> Path:
    """A new, empty folder beside ``path`` (``unique_sibling``), created by this call alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        folder = unique_sibling(path, kind)
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue


@contextmanager
def written_whole(path: Path) -> Iterator[Path]:
    """Where to write ``path``'s new content: a file beside it, renamed into place when the block
    ends without an error. A reader never sees half a file, and a build killed or stopped by a
    full disk leaves the old file as it was, never a partial one."""
    # created exclusively (O_EXCL) under a name of its own: writers in one process (threads) or
    # with one pid (the run pods, each PID 1, on one shared volume) never share a file
    while True:
        tmp = unique_sibling(path, "tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def folder_written_whole(path: Path) -> Iterator[Path]:
    """Where to write folder ``path``'s new content: a sibling folder that replaces it when the
    block ends without an error (the old one is removed only then), so a killed build leaves the
    old folder whole, never a mix of two."""
    # this writer's own folders (mkdir creates exclusively), so a second writer of the same
    # folder, even with the same pid, never removes or fills the first one's
    staging, old = own_folder(path, "new"), own_folder(path, "old") / "was"
    try:
        yield staging
        if path.exists():
            path.rename(old)
        staging.rename(path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old.parent, ignore_errors=True)


def write_whole(path: Path, data) -> Path:
    """``data`` into ``path`` through ``written_whole``: text (UTF-8), bytes, a numpy array
    (``.npy``), a dict of arrays (``.npz``) or a polars frame (Parquet, or CSV for a ``.csv``
    path). The project's one way to write an output file."""
    with written_whole(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        elif isinstance(data, bytes | bytearray):
            tmp.write_bytes(data)
        elif isinstance(data, np.ndarray):
            with open(tmp, "wb") as f:  # a file object: numpy adds no suffix to it
                np.save(f, data)
        elif isinstance(data, dict):
            with open(tmp, "wb") as f:
                np.savez(f, **data)
        elif path.suffix == ".csv":
            data.write_csv(tmp)
        else:
            data.write_parquet(tmp)
    return path


def read_json_or_none(path: Path) -> dict | None:
    """A JSON object a stage wrote for itself (a manifest), or None when it is missing or cannot
    be read (truncated, not an object): the caller starts afresh instead of failing every later
    build on it."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
