"""A registry entry's leaderboard rows from its runs: one per setting, its scores with their
intervals (``evaluate.report``), then its provenance and row ids. The board and
``saber evaluate`` both make their rows here, so a row id means the same wherever it is printed."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from saber_assets.leaderboard.scores import score_table
from saber_assets.retrievers.entries import RetrieverEntry
from saber_assets.runs.provenance import provenance, with_provenance


def entry_rows(
    entry: RetrieverEntry,
    runs: pl.DataFrame,
    domains: Sequence[str],
    bench_id: str,
    *,
    resamples: int,
    seed: int,
    k: int,
    code: str | None = None,
    columns: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """``columns`` adds the caller's own columns (the board's contamination columns, origin)
    before the provenance ones, to rows that exist: an entry whose runs hold no query has none."""
    rows = score_table(runs, domains, resamples, seed, k=k)
    if columns is not None and not rows.is_empty():
        rows = columns(rows)
    return with_provenance(rows, entry.name, provenance(entry, bench_id, code))
