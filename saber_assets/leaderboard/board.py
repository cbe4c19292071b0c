"""The board: its files, its columns and its settings, made in one place.

``Board`` reads and writes a board folder (``leaderboard.parquet`` and its CSV, the paired tests
``significance.parquet`` and its CSV, ``board.json``, the rounds curve). The scorer writes a
board under the names below (``scores.score_table``); everything that reads one (the markdown
board, the report, the explorer's data file, ``saber verify``, the CLI, the analyses) reads it
through ``Board`` and asks here for a name rather than spelling it, and the explorer's script
reads the names from its data file (``for_page``). A test plants a spelled-out name elsewhere
and goes red (``tests/test_graph.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from saber_assets.benchmark.data import BenchmarkFormatError
from saber_assets.outputs import write_whole, written_whole

SETTING = "setting"
RETRIEVER = "retriever"
QUERIES = "queries"  # the queries a row's overall mean is over
FAILED = "failed"  # queries the retriever could not score (nDCG 0 in the means)
SKIPPED = "skipped"  # queries it left out by its own rule (out of the means)
CI_LOW, CI_HIGH = "ci_low", "ci_high"  # the overall mean's bootstrap interval
CI_LOW_JOINT, CI_HIGH_JOINT = "ci_low_joint", "ci_high_joint"  # queries and judgments redrawn
CI_LOW_CLEAN, CI_HIGH_CLEAN = "ci_low_clean", "ci_high_clean"  # the contaminated queries left out

# the board's files in its folder
TABLE, TABLE_CSV = "leaderboard.parquet", "leaderboard.csv"
TESTS, TESTS_CSV = "significance.parquet", "significance.csv"
SETTINGS = "board.json"  # how it was computed, which `saber verify` reads to compute it again
CURVE = "rounds_resolution.parquet"  # separable pairs by tournament rounds (joint intervals)
MARKDOWN = "leaderboard.md"  # the board as people read it (``board_markdown.py``)
# the full-corpus track's fill beside it (``holes.py``): what `saber verify` re-derives
FILL_BOARD = "full_corpus_board.parquet"  # the full-corpus board before and after the fill
FILL_TABLE = "full_corpus_fill.parquet"  # each pooled hole, its games and its grade
FILL_SETTINGS = "full_corpus.json"  # k, games, the prior, the resamples and seed of the board

_METRIC = re.compile(r"ndcg@\d+")


def metric_column(k: int) -> str:
    """The score column for the cut-off k (``leaderboard.k``): nDCG@k."""
    return f"ndcg@{k}"


def score_column(table) -> str:
    """The nDCG@k column of a leaderboard or report table, whatever its k."""
    names = [c for c in table.columns if _METRIC.fullmatch(c)]
    if len(names) != 1:
        raise ValueError(f"expected one nDCG@k column, found {names or 'none'} in {table.columns}")
    return names[0]


def domain_mean(domain: str) -> str:
    """A domain's mean nDCG: the column is the domain's name."""
    return domain


def domain_ci(domain: str) -> str:
    """A domain's bootstrap interval, as text ``[low, high]``."""
    return f"{domain} ci"


def domain_queries(domain: str) -> str:
    """The queries a domain's cell averages."""
    return f"{domain} queries"


def board_domains(table) -> list[str]:
    """The domains a board carries, in its column order (a domain has a mean and an interval)."""
    columns = set(table.columns)
    return [c for c in table.columns if domain_ci(c) in columns]


def for_page(domains: Sequence[str]) -> dict[str, dict[str, str]]:
    """The column names a page's script reads rows by (the explorer's data): the intervals'
    bounds, and each domain's mean, interval and query count."""
    return {
        "interval": {
            "low": CI_LOW,
            "high": CI_HIGH,
            "low_joint": CI_LOW_JOINT,
            "high_joint": CI_HIGH_JOINT,
        },  # fmt: skip
        "domain_mean": {d: domain_mean(d) for d in domains},
        "domain_ci": {d: domain_ci(d) for d in domains},
        "domain_queries": {d: domain_queries(d) for d in domains},
    }


def empty_table(k: int) -> pl.DataFrame:
    """A board with no row: the columns a reader needs to say so."""
    return pl.DataFrame(schema={SETTING: pl.String, QUERIES: pl.Int64, FAILED: pl.Int64,
                                metric_column(k): pl.Float64, CI_LOW: pl.Float64,
                                CI_HIGH: pl.Float64})  # fmt: skip


@dataclass(frozen=True)
class BoardSettings:
    """``board.json``: how the board was computed, which ``saber verify`` reads to compute it
    again: the cut-off, the tie rule, the resamples, the seed, the level, the queries left out,
    and the retrievers whose run files stay beside the board without a row (``off_board``: left
    the registry, or no query scored), which verify names."""

    k: int
    ties: str
    bootstrap_resamples: int
    test_resamples: int
    seed: int
    alpha: float
    excluded_queries: tuple[str, ...] = ()
    off_board: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({f.name: (sorted(v) if isinstance(v := getattr(self, f.name), tuple)
                                    else v) for f in fields(self)}, indent=2)  # fmt: skip

    @classmethod
    def from_json(cls, text: str, where: str) -> BoardSettings:
        """Every key present and of its type, or a ``BenchmarkFormatError`` saying which."""
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise BenchmarkFormatError(f"{where}: unreadable ({exc})") from None
        if not isinstance(raw, dict):
            raise BenchmarkFormatError(f"{where}: not a map of settings")
        # the two lists were added later: a board from before them has none of either
        raw = {"excluded_queries": [], "off_board": [], **raw}
        missing = [f.name for f in fields(cls) if f.name not in raw]
        if missing:
            raise BenchmarkFormatError(f"{where}: lacks {missing}")
        kinds = {"k": int, "bootstrap_resamples": int, "test_resamples": int, "seed": int,
                 "alpha": (int, float), "ties": str, "excluded_queries": list, "off_board": list}  # fmt: skip
        wrong = [key for key, kind in kinds.items()
                 if not isinstance(raw[key], kind) or isinstance(raw[key], bool)]  # fmt: skip
        if wrong:
            raise BenchmarkFormatError(f"{where}: {wrong} of the wrong type")
        known = {f.name for f in fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items() if k in known}
        return cls(**values)


@dataclass
class Board:
    """A board folder's contents: the table (one row per retriever × setting), the paired tests,
    the settings it was computed with and, where the judgments were carried, the rounds curve."""

    table: pl.DataFrame
    tests: pl.DataFrame
    settings: BoardSettings
    curve: pl.DataFrame | None = None

    @property
    def metric(self) -> str:
        return score_column(self.table)

    @staticmethod
    def exists(folder: Path) -> bool:
        return (Path(folder) / TABLE).is_file()

    @staticmethod
    def read_table(folder: Path) -> pl.DataFrame:
        """The table alone (Parquet: the CSV is for people)."""
        return pl.read_parquet(Path(folder) / TABLE)

    @staticmethod
    def read_tests(folder: Path) -> pl.DataFrame | None:
        """The paired tests, None where the board wrote none."""
        path = Path(folder) / TESTS
        return pl.read_parquet(path) if path.is_file() else None

    @staticmethod
    def read_settings(folder: Path) -> BoardSettings:
        """``board.json``, or a ``BenchmarkFormatError`` that says what is wrong with it."""
        path = Path(folder) / SETTINGS
        try:
            text = path.read_text()
        except OSError as exc:
            raise BenchmarkFormatError(f"{path}: unreadable ({exc})") from None
        return BoardSettings.from_json(text, str(path))

    @staticmethod
    def read_curve(folder: Path) -> pl.DataFrame | None:
        path = Path(folder) / CURVE
        return pl.read_parquet(path) if path.is_file() else None

    def write(self, folder: Path) -> None:
        """Every file, each written whole; a curve from an earlier board is removed with it (it
        would describe other judgments)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for write, name in ((self.tests.write_parquet, TESTS), (self.tests.write_csv, TESTS_CSV),
                            (self.table.write_csv, TABLE_CSV),
                            (self.table.write_parquet, TABLE)):  # fmt: skip
            with written_whole(folder / name) as tmp:  # the warehouse's `leaderboard` view reads it
                write(tmp)
        if self.curve is not None:
            write_whole(folder / CURVE, self.curve)
        else:
            (folder / CURVE).unlink(missing_ok=True)
        write_whole(folder / SETTINGS, self.settings.to_json())
