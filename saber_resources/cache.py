"""Content-addressed caches in DuckDB: LLM answers and embeddings.

A re-materialisation, a retry or a resumed run looks here first and never repeats finished work.
Parse failures are stored with the raw answer, so a failure is never silently forgotten either.
The caches take a ``connect`` context-manager factory (e.g. ``Warehouse.connect``) so they work on
a DuckDB file or on one shared in-memory connection.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import duckdb
import numpy as np
import polars as pl

Connect = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


@contextmanager
def registered(conn: duckdb.DuckDBPyConnection, name: str, frame: pl.DataFrame) -> Iterator[None]:
    """Expose a polars frame to SQL as ``name`` for the duration of the block."""
    conn.register(name, frame.to_arrow())
    try:
        yield
    finally:
        conn.unregister(name)


def content_hash(obj) -> str:
    """Stable hash of a JSON-able object (sorted keys, no whitespace)."""
    data = (
        obj
        if isinstance(obj, str)
        else json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    )
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


@dataclass
class CachedAnswer:
    text: str
    top_logprobs: dict[str, float] | None
    parsed_ok: bool | None
    parse_error: str | None
    finish_reason: str | None = None


class LLMCache:
    """Every LLM request/answer keyed by (backend, model, prompt version, request hash)."""

    TABLE = "llm_cache"

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        with self._connect() as conn:
            conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {self.TABLE} (
                    backend VARCHAR, model VARCHAR, prompt_version VARCHAR, request_hash VARCHAR,
                    request JSON, answer VARCHAR, top_logprobs JSON, parsed_ok BOOLEAN, parse_error VARCHAR,
                    created_at TIMESTAMP DEFAULT current_timestamp, finish_reason VARCHAR,
                    PRIMARY KEY (backend, model, prompt_version, request_hash))"""
            )
            # caches written before finish_reason was kept (its absence reads as "stop")
            conn.execute(f"ALTER TABLE {self.TABLE} ADD COLUMN IF NOT EXISTS finish_reason VARCHAR")

    def get_many(
        self, backend: str, model: str, version: str, hashes: Iterable[str]
    ) -> dict[str, CachedAnswer]:
        hashes = list(dict.fromkeys(hashes))
        if not hashes:
            return {}
        with self._connect() as conn:
            with registered(conn, "_want", pl.DataFrame({"request_hash": hashes})):
                rows = conn.execute(
                    f"""SELECT c.request_hash, answer, top_logprobs, parsed_ok, parse_error, finish_reason
                        FROM {self.TABLE} c
                        JOIN _want USING (request_hash)
                        WHERE backend = ? AND model = ? AND prompt_version = ?""",
                    [backend, model, version],
                ).fetchall()
        return {
            h: CachedAnswer(a, json.loads(lp) if lp else None, ok, err, fin)
            for h, a, lp, ok, err, fin in rows
        }

    def put_many(
        self,
        backend: str,
        model: str,
        version: str,
        rows: list[tuple[str, dict, str, dict | None, bool, str | None, str | None]],
    ) -> None:
        """rows: (request hash, request, answer text, top logprobs, parsed ok, parse error,
        finish reason)."""
        if not rows:
            return
        df = pl.DataFrame(
            {
                "backend": [backend] * len(rows),
                "model": [model] * len(rows),
                "prompt_version": [version] * len(rows),
                "request_hash": [r[0] for r in rows],
                "request": [json.dumps(r[1], ensure_ascii=False) for r in rows],
                "answer": [r[2] for r in rows],
                "top_logprobs": [json.dumps(r[3]) if r[3] is not None else None for r in rows],
                "parsed_ok": [r[4] for r in rows],
                "parse_error": [r[5] for r in rows],
                "finish_reason": [r[6] for r in rows],
            },
            schema_overrides={
                "parse_error": pl.String,
                "top_logprobs": pl.String,
                "finish_reason": pl.String,
            },
        )
        with self._connect() as conn:
            with registered(conn, "_new", df):
                conn.execute(
                    f"""INSERT OR REPLACE INTO {self.TABLE}
                        (backend, model, prompt_version, request_hash, request, answer, top_logprobs, parsed_ok,
                         parse_error, finish_reason)
                        SELECT backend, model, prompt_version, request_hash, request::JSON, answer, top_logprobs::JSON,
                               parsed_ok, parse_error, finish_reason FROM _new"""
                )

    def failures(self) -> pl.DataFrame:
        with self._connect() as conn:
            return conn.sql(f"SELECT * FROM {self.TABLE} WHERE parsed_ok = false").pl()


class EmbeddingCache:
    """Vectors keyed by (model id, revision, text hash); stored as float32 bytes."""

    TABLE = "embedding_cache"

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        with self._connect() as conn:
            conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {self.TABLE} (
                    model VARCHAR, revision VARCHAR, text_hash VARCHAR, dim INTEGER, vector BLOB,
                    PRIMARY KEY (model, revision, text_hash))"""
            )

    def get_many(self, model: str, revision: str, hashes: list[str]) -> dict[str, np.ndarray]:
        if not hashes:
            return {}
        want = pl.DataFrame({"text_hash": list(dict.fromkeys(hashes))})
        with self._connect() as conn, registered(conn, "_want", want):
            rows = conn.execute(
                f"""SELECT c.text_hash, vector FROM {self.TABLE} c JOIN _want USING (text_hash)
                    WHERE model = ? AND revision = ?""",
                [model, revision],
            ).fetchall()
        return {h: np.frombuffer(v, dtype=np.float32) for h, v in rows}

    def put_many(self, model: str, revision: str, hashes: list[str], vectors: np.ndarray) -> None:
        if not hashes:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        df = pl.DataFrame(
            {
                "model": [model] * len(hashes),
                "revision": [revision] * len(hashes),
                "text_hash": hashes,
                "dim": [vectors.shape[1]] * len(hashes),
                "vector": [row.tobytes() for row in vectors],
            }
        )
        with self._connect() as conn:
            with registered(conn, "_new", df):
                conn.execute(f"INSERT OR REPLACE INTO {self.TABLE} SELECT * FROM _new")
