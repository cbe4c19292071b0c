"""Judgments in a store (table ``judgments``: a DuckDB file or PostgreSQL), written as they
arrive; the primary key (run, query, round, pair) makes a duplicated write a no-op."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields

import polars as pl

from saber_assets.tournament.engine import Judgment
from saber_resources.stores import Connect, StoreDB, as_store, ensure_table

COLUMNS = [f.name for f in fields(Judgment)]
TYPES = {"round": pl.Int32, "max_tokens": pl.Int32, "p_first": pl.Float64}


class SQLJudgmentStore:
    TABLE = "judgments"

    def __init__(self, store: StoreDB | Connect) -> None:
        self.db = as_store(store)
        ensure_table(self.db, self.TABLE)

    def load(self, run_key: str) -> list[Judgment]:
        rows = self.db.fetch(
            f"SELECT {', '.join(COLUMNS)} FROM {self.TABLE} WHERE run_key = ?", [run_key]
        )
        return [Judgment(*r) for r in rows]

    def add(self, run_key: str, judgments: list[Judgment]) -> None:
        if not judgments:
            return
        df = pl.DataFrame(
            [asdict(j) for j in judgments], schema={c: TYPES.get(c, pl.String) for c in COLUMNS}
        )
        self.db.insert_ignore(self.TABLE, df.with_columns(pl.lit(run_key).alias("run_key")))

    def count(self, run_key: str) -> int:
        return int(
            self.db.fetch(f"SELECT count(*) FROM {self.TABLE} WHERE run_key = ?", [run_key])[0][0]
        )

    def frame(
        self, run_key: str, used: Sequence[tuple[str, int, str, str]] | None = None
    ) -> pl.DataFrame:
        """Every judgment stored under the key, or only those a tournament stood on (``used``:
        its (query, round, a, b)): a changed candidate set of the same queries (new thresholds,
        a changed pool) leaves the old set's judgments stored, replayable where a pair comes
        back, but they are no part of this tournament."""
        df = self.db.frame(
            f"SELECT * FROM {self.TABLE} WHERE run_key = ? ORDER BY query, round, a, b", [run_key]
        )
        if used is None:
            return df
        key = ["query", "round", "a", "b"]
        schema = {c: df.schema[c] for c in key}
        return df.join(pl.DataFrame(used, schema=schema, orient="row"), on=key, how="semi").sort(
            key
        )


DuckDBJudgmentStore = SQLJudgmentStore  # the DuckDB file was the only kind before
