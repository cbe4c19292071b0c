"""DuckDB warehouse: views over the Parquet outputs, defined by the SQL files in ``sql/``.

It is derived and rebuildable (``saber warehouse``): nothing a later stage needs lives only here
(the caches and judgments are in the stores, ``saber_resources.stores``).

``path=":memory:"`` (tests) keeps one connection for the resource's lifetime, since every new
in-memory connection would be a different, empty database.
"""

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl
from dagster import ConfigurableResource
from pydantic import PrivateAttr

from saber_resources.duckdb_files import DuckDBFile, registered, sql_literal

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _checked_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"not a valid table name: {name!r}")
    return name


def _exists(path: str) -> bool:
    """A Parquet input exists: a file, or a glob that matches at least one."""
    p = Path(path)
    if "*" in p.name:
        return any(p.parent.glob(p.name)) if p.parent.exists() else False
    return p.exists()


class Warehouse(ConfigurableResource):
    """DuckDB database file (or ``:memory:``) plus the folder of Parquet assets its views read."""

    path: str
    parquet_dir: str = ""
    sql_dir: str = ""
    # DuckDB lets one process write a file at a time; concurrent runs take turns (connections are
    # short-lived: one cache lookup or write each), waiting up to this long for the lock.
    lock_wait_s: float = 120.0

    _db: DuckDBFile | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._file().connect() as conn:
            yield conn

    def _file(self) -> DuckDBFile:
        with self._lock:
            if self._db is None:
                self._db = DuckDBFile(self.path, self.lock_wait_s)
            return self._db

    def replace_table(self, name: str, df: pl.DataFrame) -> int:
        """Replace table ``name`` with ``df`` (an empty frame still creates the typed table)."""
        name = _checked_name(name)
        with self.connect() as conn:
            with registered(conn, "_incoming", df):
                conn.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _incoming")
        return df.height

    def query(self, sql: str, params: list | None = None) -> pl.DataFrame:
        with self.connect() as conn:
            return conn.sql(sql, params=params).pl()

    def refresh_views(self) -> list[str]:
        """(Re)create the views in ``sql/*.sql`` whose Parquet inputs exist; returns the views made.

        The SQL files use ``'{parquet}/…'`` for a path in the Parquet folder, filled in as a quoted
        literal (the folder's name is never SQL). A file is skipped while an input it reads is
        missing (its asset not materialised yet), and created on a later refresh.
        """
        if not self.sql_dir:
            return []
        made: list[str] = []
        with self.connect() as conn:
            for file in sorted(Path(self.sql_dir).glob("*.sql")):
                template = file.read_text(encoding="utf-8")
                inputs = [
                    p.replace("{parquet}", self.parquet_dir)
                    for p in re.findall(r"read_parquet\('([^']+)'", template)
                ]
                if not all(_exists(p) for p in inputs):
                    continue
                text = re.sub(
                    r"'(\{parquet\}[^']*)'",
                    lambda m: sql_literal(m.group(1).replace("{parquet}", self.parquet_dir)),
                    template,
                )
                try:
                    conn.execute(text)
                except duckdb.CatalogException:
                    continue  # a table it reads is not written yet
                made += re.findall(r"CREATE OR REPLACE VIEW (\w+)", text)
        return made
