"""Judgments in the DuckDB warehouse (table ``judgments``), written as they arrive."""

from __future__ import annotations

from dataclasses import asdict, fields

import polars as pl

from saber_resources.cache import Connect, registered

from .engine import Judgment

COLUMNS = [f.name for f in fields(Judgment)]
TYPES = {"round": pl.Int32, "max_tokens": pl.Int32, "p_first": pl.Float64}


class DuckDBJudgmentStore:
    TABLE = "judgments"

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        with self._connect() as conn:
            conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {self.TABLE} (
                    run_key VARCHAR, query VARCHAR, round INTEGER, a VARCHAR, b VARCHAR, shown_first VARCHAR,
                    winner VARCHAR, judge VARCHAR, prompt_version VARCHAR, raw_hash VARCHAR, error VARCHAR, raw VARCHAR,
                    created_at TIMESTAMP DEFAULT current_timestamp,
                    PRIMARY KEY (run_key, query, round, a, b))"""
            )
            # stores written before the token budget was recorded
            conn.execute(f"ALTER TABLE {self.TABLE} ADD COLUMN IF NOT EXISTS max_tokens INTEGER")
            conn.execute(f"ALTER TABLE {self.TABLE} ADD COLUMN IF NOT EXISTS p_first DOUBLE")

    def load(self, run_key: str) -> list[Judgment]:
        with self._connect() as conn:
            rows = conn.execute(
                f"SELECT {', '.join(COLUMNS)} FROM {self.TABLE} WHERE run_key = ?", [run_key]
            ).fetchall()
        return [Judgment(*r) for r in rows]

    def add(self, run_key: str, judgments: list[Judgment]) -> None:
        if not judgments:
            return
        df = pl.DataFrame(
            [asdict(j) for j in judgments],
            schema={c: TYPES.get(c, pl.String) for c in COLUMNS},
        )
        df = df.with_columns(pl.lit(run_key).alias("run_key"))
        with self._connect() as conn:
            with registered(conn, "_new", df):
                conn.execute(
                    f"INSERT OR REPLACE INTO {self.TABLE} (run_key, {', '.join(COLUMNS)}) SELECT run_key, {', '.join(COLUMNS)} FROM _new"
                )

    def frame(self, run_key: str) -> pl.DataFrame:
        with self._connect() as conn:
            return conn.sql(
                f"SELECT * FROM {self.TABLE} WHERE run_key = '{run_key}' ORDER BY query, round, a, b"
            ).pl()
