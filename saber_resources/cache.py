"""Content-addressed caches of the paid answers: LLM answers and embeddings.

A re-materialisation, a retry or a resumed run looks here first and never repeats finished work.
Parse failures are stored with the raw answer, so a failure is never silently forgotten either.
Both live in a store (``saber_resources.stores``: a DuckDB file or PostgreSQL); writes are
idempotent (``ON CONFLICT DO NOTHING`` on the content key). A DuckDB ``connect`` factory (e.g.
``Warehouse.connect``) is accepted where a store is expected.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl

from saber_resources.stores import Connect, StoreDB, as_store, ensure_table, read_json, registered  # noqa: F401


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
    token_logprobs: list | None = None
    reasoning: str | None = None  # kept for a cut-off answer only (``LLMResponse.reasoning``)


class LLMCache:
    """Every LLM request/answer keyed by (backend, model, prompt version, request hash)."""

    TABLE = "llm_cache"

    def __init__(self, store: StoreDB | Connect) -> None:
        self.db = as_store(store)
        ensure_table(self.db, self.TABLE)

    def get_many(
        self, backend: str, model: str, version: str, hashes: Iterable[str]
    ) -> dict[str, CachedAnswer]:
        rows = self.db.lookup(
            self.TABLE,
            [
                "request_hash",
                "answer",
                "top_logprobs",
                "parsed_ok",
                "parse_error",
                "finish_reason",
                "token_logprobs",
                "reasoning",
            ],
            {"backend": backend, "model": model, "prompt_version": version},
            "request_hash",
            list(hashes),
        )
        return {
            h: CachedAnswer(
                a, read_json(lp) if lp else None, ok, err, fin, read_json(tl) if tl else None, rs
            )
            for h, a, lp, ok, err, fin, tl, rs in rows
        }

    def put_many(
        self,
        backend: str,
        model: str,
        version: str,
        rows: list[tuple],
    ) -> None:
        """rows: (request hash, request, answer text, top logprobs, parsed ok, parse error,
        finish reason[, token logprobs[, reasoning]])."""
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
                "token_logprobs": [
                    json.dumps(r[7]) if len(r) > 7 and r[7] is not None else None for r in rows
                ],
                "reasoning": [r[8] if len(r) > 8 else None for r in rows],
            },
            schema_overrides={
                "parse_error": pl.String,
                "top_logprobs": pl.String,
                "finish_reason": pl.String,
                "token_logprobs": pl.String,
                "reasoning": pl.String,
            },
        )
        self.db.insert_ignore(
            self.TABLE, df, json_columns=("request", "top_logprobs", "token_logprobs")
        )

    def failures(self) -> pl.DataFrame:
        return self.db.frame(f"SELECT * FROM {self.TABLE} WHERE parsed_ok = false")


class EmbeddingCache:
    """Vectors keyed by (model id, revision, text hash); stored as float32 bytes."""

    TABLE = "embedding_cache"

    def __init__(self, store: StoreDB | Connect) -> None:
        self.db = as_store(store)
        ensure_table(self.db, self.TABLE)

    def get_many(self, model: str, revision: str, hashes: list[str]) -> dict[str, np.ndarray]:
        rows = self.db.lookup(
            self.TABLE,
            ["text_hash", "vector"],
            {"model": model, "revision": revision},
            "text_hash",
            hashes,
        )
        return {h: np.frombuffer(bytes(v), dtype=np.float32) for h, v in rows}

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
        self.db.insert_ignore(self.TABLE, df)
