"""Stores for the paid answers — the LLM cache, the embedding cache, the judgments, people's
labels — behind one small SQL interface with two real backends:

- ``duckdb``: a local file (the embedded default). DuckDB lets one process write at a time;
  connections are short-lived and wait for the lock, so concurrent runs take turns.
- ``postgres``: a PostgreSQL server through psycopg 3, for many writers (UI backfills, a cluster).

Every write is idempotent: primary keys on the content hash / judgment key and
``ON CONFLICT DO NOTHING``, so a retried or duplicated run never doubles a row. Tables are created
(and migrated: ``ADD COLUMN IF NOT EXISTS``) on first use. SQL is written once, with ``?``
placeholders and ``{json}``/``{blob}``/``{double}`` types; each backend translates.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import duckdb
import polars as pl

from saber_resources.duckdb_files import DuckDBFile, registered, sql_literal

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


class StoreDB:
    """What the caches and the judgment store need from a database."""

    kind = ""
    types: dict[str, str] = {}

    def ddl(self, sql: str) -> str:
        return sql.format(**self.types)

    def execute(self, sql: str, params: Sequence = ()) -> None:
        raise NotImplementedError

    def execute_ddl(self, statements: Sequence[str]) -> None:
        """Run schema statements in order (``ensure_table``)."""
        for sql in statements:
            self.execute(self.ddl(sql))

    def fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        raise NotImplementedError

    def frame(self, sql: str, params: Sequence = ()) -> pl.DataFrame:
        raise NotImplementedError

    def insert_ignore(self, table: str, df: pl.DataFrame, json_columns: Sequence[str] = ()) -> int:
        """Insert the frame's rows; rows whose primary key exists are left alone."""
        raise NotImplementedError

    def lookup(
        self, table: str, columns: Sequence[str], where: dict[str, Any], key: str, keys: list
    ) -> list[tuple]:
        """``SELECT columns FROM table WHERE key IN keys AND col = value ...``"""
        raise NotImplementedError


def read_json(value):
    """A JSON column as Python: DuckDB returns text, PostgreSQL parsed values."""
    return json.loads(value) if isinstance(value, str) else value


def _is_race(exc: Exception) -> bool:
    """DuckDB errors that two threads of one process can cause and a retry resolves.

    Two transactions inserting the same key at once: DuckDB refuses the second at commit instead
    of skipping it; once the first is committed the retry skips it.
    """
    return isinstance(exc, (duckdb.ConstraintException, duckdb.TransactionException))


def _retry_races(action: Callable[[], Any], attempts: int = 20) -> Any:
    for attempt in range(attempts):
        try:
            return action()
        except duckdb.Error as exc:
            if attempt == attempts - 1 or not _is_race(exc):
                raise
            time.sleep(0.01 * (attempt + 1))


class DuckDBStore(StoreDB):
    kind = "duckdb"
    types = {"json": "JSON", "blob": "BLOB", "double": "DOUBLE"}

    def __init__(self, connect: Connect) -> None:
        self.connect = connect

    def execute(self, sql: str, params: Sequence = ()) -> None:
        with self.connect() as conn:
            conn.execute(sql, list(params))

    def fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self.connect() as conn:
            return conn.execute(sql, list(params)).fetchall()

    def frame(self, sql: str, params: Sequence = ()) -> pl.DataFrame:
        with self.connect() as conn:
            return conn.sql(sql, params=list(params)).pl()

    def insert_ignore(self, table: str, df: pl.DataFrame, json_columns: Sequence[str] = ()) -> int:
        if df.height == 0:
            return 0
        cols = ", ".join(df.columns)
        select = ", ".join(f"{c}::JSON" if c in json_columns else c for c in df.columns)
        sql = f"INSERT INTO {table} ({cols}) SELECT {select} FROM _new ON CONFLICT DO NOTHING"

        def insert() -> int:
            with self.connect() as conn, registered(conn, "_new", df):
                conn.execute(sql)
            return df.height

        return _retry_races(insert)

    def lookup(self, table, columns, where, key, keys) -> list[tuple]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return []
        conds = "".join(f" AND t.{c} = ?" for c in where)
        cols = ", ".join(f"t.{c}" for c in columns)
        want = pl.DataFrame({key: keys})

        def select() -> list[tuple]:
            with self.connect() as conn, registered(conn, "_want", want):
                return conn.execute(
                    f"SELECT {cols} FROM {table} t JOIN _want USING ({key}) WHERE true{conds}",
                    list(where.values()),
                ).fetchall()

        return _retry_races(select)


DDL_LOCK = 0x5ABE7_0DD1  # the advisory lock key saber's schema changes take on PostgreSQL


class PostgresStore(StoreDB):
    """PostgreSQL through psycopg 3; one connection per thread, opened on first use."""

    kind = "postgres"
    types = {"json": "JSONB", "blob": "BYTEA", "double": "DOUBLE PRECISION"}

    def __init__(self, dsn: str, connect_timeout_s: float = 30.0, attempts: int = 5) -> None:
        self._dsn = dsn  # never logged: it may hold a password
        self._timeout = connect_timeout_s
        self._attempts = attempts
        self._local = threading.local()
        self.reconnects = 0  # connections lost mid-statement (killed, restarted) and retried

    def __repr__(self) -> str:
        return "PostgresStore(<dsn from the environment>)"

    def _conn(self):
        import psycopg

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            deadline = time.monotonic() + self._timeout
            while True:
                try:
                    conn = psycopg.connect(self._dsn, autocommit=True)
                    break
                except psycopg.OperationalError as exc:
                    if time.monotonic() > deadline:
                        raise ConnectionError(
                            f"cannot reach the PostgreSQL store: {str(exc).splitlines()[0]}"
                        ) from None
                    time.sleep(0.5)
            self._local.conn = conn
        return conn

    @staticmethod
    def _sql(sql: str) -> str:
        return re.sub(r"\?", "%s", sql)

    def _retry_lost(self, action: Callable[[Any], Any]) -> Any:
        """``action(connection)``, again on a new connection when the server dropped this one
        mid-statement (``pg_terminate_backend``, a restart, a failover): a transaction the drop
        interrupted was rolled back whole, and every write here is idempotent (inserts ignore
        rows already there), so a retry loses nothing and doubles nothing."""
        import psycopg

        for attempt in range(self._attempts):
            conn = self._conn()
            try:
                return action(conn)
            except psycopg.OperationalError:
                # the session is gone or unusable (a dropped pipeline leaves it "busy" before
                # psycopg marks it broken): a new one, whatever the server said
                self._local.conn = None
                with contextlib.suppress(Exception):
                    conn.close()
                if attempt == self._attempts - 1:
                    raise
                self.reconnects += 1
                time.sleep(0.2 * attempt)

    def execute(self, sql: str, params: Sequence = ()) -> None:
        self._retry_lost(lambda conn: conn.execute(self._sql(sql), list(params)))

    def execute_ddl(self, statements: Sequence[str]) -> None:
        # Two sessions running CREATE TABLE IF NOT EXISTS at once can both miss the table and
        # the second then fails on pg_type's unique index (annotation chunks starting together
        # on a fresh database did, in CI). One transaction-scoped advisory lock takes them in
        # turn; DDL is transactional, so a session that waited sees the table and skips it.

        def ddl(conn) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s::bigint)", [DDL_LOCK])
                for sql in statements:
                    conn.execute(self.ddl(sql))

        self._retry_lost(ddl)

    def fetch(self, sql: str, params: Sequence = ()) -> list[tuple]:
        return self._retry_lost(lambda conn: conn.execute(self._sql(sql), list(params)).fetchall())

    def frame(self, sql: str, params: Sequence = ()) -> pl.DataFrame:
        def read(conn):
            cur = conn.execute(self._sql(sql), list(params))
            return [d.name for d in cur.description], cur.fetchall()

        names, rows = self._retry_lost(read)
        return pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None)

    def insert_ignore(self, table: str, df: pl.DataFrame, json_columns: Sequence[str] = ()) -> int:
        if df.height == 0:
            return 0
        cols = ", ".join(df.columns)
        marks = ", ".join("%s::jsonb" if c in json_columns else "%s" for c in df.columns)
        sql = f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT DO NOTHING"
        # rows in primary-key order: two sessions inserting overlapping keys (annotation
        # chunks caching the same texts' embeddings) then take the index locks in the same
        # order, and cannot deadlock (they did, in CI's cluster test)
        key = [c for c in primary_key(table) if c in df.columns]
        rows = df.sort(key).rows() if key else df.rows()

        def insert(conn) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(sql, rows)

        self._retry_lost(insert)
        return df.height

    def lookup(self, table, columns, where, key, keys) -> list[tuple]:
        keys = list(dict.fromkeys(keys))
        if not keys:
            return []
        conds = "".join(f" AND {c} = %s" for c in where)
        sql = f"SELECT {', '.join(columns)} FROM {table} WHERE {key} = ANY(%s){conds}"
        return self._retry_lost(lambda conn: conn.execute(sql, [keys, *where.values()]).fetchall())


def primary_key(table: str) -> list[str]:
    """The primary-key columns of a store table (from its DDL below); [] for none."""
    m = re.search(r"PRIMARY KEY \(([^)]*)\)", TABLES.get(table, ""))
    return [c.strip() for c in m.group(1).split(",")] if m else []


# The store tables, in one place: created on first use, migrated forward by the ALTERs.
TABLES: dict[str, str] = {
    "llm_cache": """CREATE TABLE IF NOT EXISTS llm_cache (
        backend VARCHAR, model VARCHAR, prompt_version VARCHAR, request_hash VARCHAR,
        request {json}, answer VARCHAR, top_logprobs {json}, parsed_ok BOOLEAN,
        parse_error VARCHAR, created_at TIMESTAMP DEFAULT current_timestamp,
        finish_reason VARCHAR, token_logprobs {json}, reasoning VARCHAR,
        PRIMARY KEY (backend, model, prompt_version, request_hash))""",
    "embedding_cache": """CREATE TABLE IF NOT EXISTS embedding_cache (
        model VARCHAR, revision VARCHAR, text_hash VARCHAR, dim INTEGER, vector {blob},
        PRIMARY KEY (model, revision, text_hash))""",
    "judgments": """CREATE TABLE IF NOT EXISTS judgments (
        run_key VARCHAR, query VARCHAR, round INTEGER, a VARCHAR, b VARCHAR,
        shown_first VARCHAR, winner VARCHAR, judge VARCHAR, prompt_version VARCHAR,
        raw_hash VARCHAR, error VARCHAR, raw VARCHAR,
        created_at TIMESTAMP DEFAULT current_timestamp, max_tokens INTEGER, p_first {double},
        PRIMARY KEY (run_key, query, round, a, b))""",
    # people's pairwise labels (the human study): one per task and annotator, never overwritten
    "human_labels": """CREATE TABLE IF NOT EXISTS human_labels (
        task_id VARCHAR, annotator VARCHAR, annotator_email VARCHAR, query VARCHAR,
        shown_first VARCHAR, shown_second VARCHAR, label VARCHAR, labelled_at TIMESTAMP,
        lead_time_s {double}, study VARCHAR, ls_task BIGINT, ls_annotation BIGINT,
        imported_at TIMESTAMP DEFAULT current_timestamp,
        PRIMARY KEY (task_id, annotator))""",
    # embedding models found on inference servers (saber_assets/retrievers/discovery.py): one
    # row per derived registry name, never deleted (a model that leaves is marked gone)
    "discovered_retrievers": """CREATE TABLE IF NOT EXISTS discovered_retrievers (
        name VARCHAR, endpoint VARCHAR, base_url VARCHAR, model_id VARCHAR, status VARCHAR,
        entry {json}, dimension INTEGER, max_model_len INTEGER, probe VARCHAR,
        first_seen TIMESTAMP, last_seen TIMESTAMP,
        PRIMARY KEY (name))""",
}
MIGRATIONS: dict[str, list[str]] = {
    # columns added after a table was first shipped (their absence reads as NULL)
    "llm_cache": [
        "ALTER TABLE llm_cache ADD COLUMN IF NOT EXISTS finish_reason VARCHAR",
        "ALTER TABLE llm_cache ADD COLUMN IF NOT EXISTS token_logprobs {json}",
        "ALTER TABLE llm_cache ADD COLUMN IF NOT EXISTS reasoning VARCHAR",
    ],
    "judgments": [
        "ALTER TABLE judgments ADD COLUMN IF NOT EXISTS max_tokens INTEGER",
        "ALTER TABLE judgments ADD COLUMN IF NOT EXISTS p_first {double}",
    ],
}


def ensure_table(db: StoreDB, name: str) -> None:
    db.execute_ddl([TABLES[name], *MIGRATIONS.get(name, [])])


def as_store(x: StoreDB | Connect) -> StoreDB:
    """A store, or a DuckDB ``connect`` factory (e.g. ``Warehouse.connect``) made into one."""
    return x if isinstance(x, StoreDB) else DuckDBStore(x)


# ------------------------------------------------------------------------ Dagster resource

from dagster import ConfigurableResource  # noqa: E402
from pydantic import Field, PrivateAttr  # noqa: E402


class StoresResource(ConfigurableResource):
    """Where the caches and judgments live: ``duckdb`` (``path``) or ``postgres`` (``dsn``, set
    with ``dagster.EnvVar``: never logged, never stored in metadata)."""

    kind: str = "duckdb"
    path: str = ""
    dsn: str | None = Field(default=None, description="Set with dagster.EnvVar; never logged")
    # an older layout kept the stores inside the warehouse file: copied over on first use
    legacy_path: str = ""

    _db: StoreDB | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def db(self) -> StoreDB:
        with self._lock:
            if self._db is None:
                self._db = self._open()
        return self._db

    def describe(self) -> dict:
        """Safe to log or store: no secrets."""
        return {"kind": self.kind, **({"path": self.path} if self.kind == "duckdb" else {})}

    def _open(self) -> StoreDB:
        if self.kind == "postgres":
            if not self.dsn:
                raise ValueError(
                    "stores.kind is postgres but its DSN environment variable is empty"
                )
            return PostgresStore(self.dsn)
        if self.kind != "duckdb":
            raise ValueError(f"unknown store kind {self.kind!r} (duckdb, postgres)")
        from pathlib import Path

        fresh = self.path != ":memory:" and not Path(self.path).exists()
        store = DuckDBStore(DuckDBFile(self.path).connect)
        if fresh and self.legacy_path and Path(self.legacy_path).exists():
            migrate_duckdb(self.legacy_path, store)
        return store


def store_tables_in(path: str) -> dict[str, int]:
    """The store tables a DuckDB file holds, with their row counts (read-only): what deleting the
    file would lose."""
    with duckdb.connect(path, read_only=True) as conn:
        have = {
            r[0]
            for r in conn.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
        return {
            t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES if t in have
        }


def migrate_duckdb(old_path: str, store: DuckDBStore) -> list[str]:
    """Copy the store tables an older warehouse file holds into a new DuckDB store (once)."""
    for name in TABLES:
        ensure_table(store, name)
    copied = []
    with store.connect() as conn:
        conn.execute(f"ATTACH {sql_literal(old_path)} AS old (READ_ONLY)")
        try:
            have = {
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'old'"
                ).fetchall()
            }
            for table in TABLES:
                if table not in have:
                    continue
                old_cols = {
                    r[0]
                    for r in conn.execute(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_catalog = 'old' AND table_name = ?",
                        [table],
                    ).fetchall()
                }
                new_cols = [r[0] for r in conn.execute(f"DESCRIBE {table}").fetchall()]
                cols = ", ".join(c for c in new_cols if c in old_cols)
                conn.execute(
                    f"INSERT INTO {table} ({cols}) SELECT {cols} FROM old.{table} "
                    "ON CONFLICT DO NOTHING"
                )
                copied.append(table)
        finally:
            conn.execute("DETACH old")
    return copied
