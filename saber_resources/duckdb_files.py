"""Opening DuckDB files safely from several threads and processes, shared by the stores and the
warehouse.

A file is attached, while someone uses it, to one in-memory DuckDB instance per process: opening
it as a database of its own (``duckdb.connect(path)``) sets up a new catalog each time, 15.6 ms
of CPU against 1.2 ms for an ``ATTACH`` (``perf/duckdb_opens.py``), and a tiny build opens its
stores and warehouse about 550 times (its CPU went from 45.1 s to 39.2 s). It is detached when its last user leaves, which releases the file
lock as closing a connection did: concurrent processes still take turns.

``path=":memory:"`` (tests) keeps one connection for the object's lifetime, since every new
in-memory connection would be a different, empty database.
"""

import itertools
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl


def sql_literal(value: str) -> str:
    """``value`` as a SQL string literal, for the statements DuckDB cannot bind a parameter into
    (``ATTACH``, a view's ``read_parquet`` path): quotes doubled, so a path can only be a path."""
    if "\x00" in value:
        raise ValueError(f"a NUL byte in {value!r}: refused in SQL")
    return "'" + value.replace("'", "''") + "'"


class _Attachments:
    """The process's in-memory instance and the files attached to it, each with its users."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._instance: duckdb.DuckDBPyConnection | None = None
        self._attached: dict[str, list] = {}  # real path -> [alias, users]
        self._names = itertools.count()
        self._parents: list[duckdb.DuckDBPyConnection] = []

    def forget_in_child(self) -> None:
        """After a fork: the child makes its own instance on first use. Its parent's is kept,
        unused and never closed (closing it could write a file the parent has attached), and
        the lock is new (a thread of the parent may have held it at the fork)."""
        if self._instance is not None:
            self._parents.append(self._instance)
        self._lock = threading.Lock()
        self._instance, self._attached = None, {}

    def _hub(self) -> duckdb.DuckDBPyConnection:
        if self._instance is None:
            self._instance = duckdb.connect(":memory:")
            # an in-memory database spills to ./.tmp by default: not the user's working folder
            spill = Path(tempfile.gettempdir()) / f"saber-duckdb-{os.getpid()}"
            self._instance.execute(f"SET temp_directory = {sql_literal(str(spill))}")
        return self._instance

    def attach(self, path: str, wait_s: float) -> tuple[str, duckdb.DuckDBPyConnection]:
        """The file's alias and a new connection to the instance, once the file is attached
        (waiting up to ``wait_s`` while another process holds its lock)."""
        deadline = time.monotonic() + wait_s
        delay = 0.05
        while True:
            with self._lock:
                hub = self._hub()
                entry = self._attached.get(path)
                if entry is None:
                    alias = f"saber_file_{next(self._names)}"
                    try:
                        hub.execute(f"ATTACH {sql_literal(path)} AS {alias}")
                    except duckdb.IOException as exc:
                        if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                            raise
                    else:
                        entry = self._attached[path] = [alias, 0]
                if entry is not None:
                    entry[1] += 1
                    return entry[0], hub.cursor()
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def release(self, path: str) -> None:
        with self._lock:
            entry = self._attached.get(path)
            if entry is None:  # attached before a fork, by the parent
                return
            entry[1] -= 1
            if entry[1] == 0:
                del self._attached[path]
                self._hub().execute(f"DETACH {entry[0]}")


_ATTACHMENTS = _Attachments()
os.register_at_fork(after_in_child=_ATTACHMENTS.forget_in_child)


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
        real = os.path.realpath(self.path)  # one file, one alias, however it is named
        alias, conn = _ATTACHMENTS.attach(real, self.lock_wait_s)
        try:
            conn.execute(f"USE {alias}")
            yield conn
        finally:
            conn.close()
            _ATTACHMENTS.release(real)


@contextmanager
def registered(conn: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> Iterator[None]:
    """Expose a polars frame to DuckDB SQL as ``name`` for the duration of the block."""
    conn.register(name, frame.to_arrow())
    try:
        yield
    finally:
        conn.unregister(name)
