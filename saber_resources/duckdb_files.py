"""Opening DuckDB files safely from several threads and processes, shared by the stores and the
warehouse.

``path=":memory:"`` (tests) keeps one connection for the object's lifetime, since every new
in-memory connection would be a different, empty database.
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

# Connections to one file in one process share a database instance, and the instance's Python
# functions (``python_arrow_scan``, behind ``register``) are added just after it is created: a
# second thread could get the instance in between and fail to read a registered frame (seen in CI
# with eight writer threads). Opening one connection at a time closes that window.
_OPEN = threading.Lock()


def open_with_retry(path: str, wait_s: float) -> duckdb.DuckDBPyConnection:
    """Open a DuckDB file, retrying while another process holds its lock."""
    deadline = time.monotonic() + wait_s
    delay = 0.05
    while True:
        try:
            with _OPEN:
                return duckdb.connect(path)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def sql_literal(value: str) -> str:
    """``value`` as a SQL string literal, for the statements DuckDB cannot bind a parameter into
    (``ATTACH``, a view's ``read_parquet`` path): quotes doubled, so a path can only be a path."""
    if "\x00" in value:
        raise ValueError(f"a NUL byte in {value!r}: refused in SQL")
    return "'" + value.replace("'", "''") + "'"


class DuckDBFile:
    """A DuckDB database file: short-lived connections, waiting up to ``lock_wait_s`` while
    another process writes it (DuckDB lets one process write a file at a time)."""

    def __init__(self, path: str, lock_wait_s: float = 120.0):
        self.path, self.lock_wait_s = path, lock_wait_s
        self._memory_conn: duckdb.DuckDBPyConnection | None = None
        self._lock = threading.Lock()

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if self.path == ":memory:":
            with self._lock:
                if self._memory_conn is None:
                    self._memory_conn = duckdb.connect(":memory:")
            yield self._memory_conn
            return
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = open_with_retry(self.path, self.lock_wait_s)
        try:
            yield conn
        finally:
            conn.close()


@contextmanager
def registered(conn: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> Iterator[None]:
    """Expose a polars frame to DuckDB SQL as ``name`` for the duration of the block."""
    conn.register(name, frame.to_arrow())
    try:
        yield
    finally:
        conn.unregister(name)
