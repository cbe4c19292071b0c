"""Embedding models found where they appear: on the inference servers of ``discovery.endpoints``.

A tick lists each endpoint's models (``GET /v1/models``) and probes an id it has not seen with
one short text (``POST /v1/embeddings``): a model that returns a vector becomes a proposed
registry entry (kind ``dense``, backend ``openai``, that endpoint and model); one that does not
is recorded as chat-only and never probed again. Everything lives in the stores'
``discovered_retrievers`` table, one row per derived name, never deleted: a model that leaves
its endpoint is marked ``gone`` (its leaderboard rows stay, with the date it was last seen) and
is the same entry when it comes back. The effective registry is the file's entries plus the
proposed and gone ones; on a name clash the file wins and the discovered row is ``shadowed``.

An endpoint that is down, slow, refuses the key or answers a malformed list is skipped for the
tick with its reason; nothing already discovered changes. The key comes from the variable the
endpoint names and is never part of a message. Pure: no Dagster here.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import polars as pl

from saber_assets.config import DiscoveryEndpoint, PipelineConfig
from saber_assets.outputs import written_whole
from saber_assets.pipeline import PipelineResource, open_stores
from saber_assets.retrievers.entries import DiscoveredFrom, RetrieverEntry
from saber_assets.retrievers.registry import load_registry
from saber_resources.embeddings import LONG_TEXT
from saber_resources.stores import StoreDB, ensure_table, read_json

TABLE = "discovered_retrievers"
PROBE_TEXT = "Find all real x with x^2 = 4."
# statuses: in the effective registry (proposed, gone) or not (chat, shadowed, adopted)
IN_REGISTRY = ("proposed", "gone")


class EndpointError(RuntimeError):
    """An endpoint that cannot be used this tick (down, slow, refused, malformed): the reason."""


@dataclass
class Tick:
    """What one discovery tick did, per endpoint."""

    proposed: list[str] = field(default_factory=list)  # new entries
    returned: list[str] = field(default_factory=list)  # gone, now back
    gone: list[str] = field(default_factory=list)
    chat: list[str] = field(default_factory=list)  # model ids recorded as not embedding
    shadowed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # endpoint -> reason

    def summary(self) -> str:
        parts = [
            f"{label}: {', '.join(v)}"
            for label, v in (
                ("proposed", self.proposed),
                ("back", self.returned),
                ("gone", self.gone),
                ("chat-only", self.chat),
                ("shadowed by the file", self.shadowed),
            )
            if v
        ]
        parts += [f"skipped {e}: {why}" for e, why in self.skipped.items()]
        return "; ".join(parts) or "nothing new"


def discovered_name(endpoint: str, model_id: str) -> str:
    """``<endpoint>--<model id slug>``, stable across ticks; a slug that had to change the id
    (case, ``/``) carries a short hash of it, so two ids never share a name."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", model_id.lower()).strip("-.")
    if slug != model_id:
        slug += "-" + hashlib.blake2b(model_id.encode(), digest_size=3).hexdigest()
    return f"{endpoint}--{slug}"


def _headers(endpoint: DiscoveryEndpoint) -> dict[str, str]:
    if not endpoint.api_key_env:
        return {}
    key = os.environ.get(endpoint.api_key_env)
    if not key:
        raise EndpointError(f"${endpoint.api_key_env} is not set")
    return {"Authorization": f"Bearer {key}"}


def _request(client: httpx.Client, method: str, url: str, **kw) -> httpx.Response:
    try:
        response = client.request(method, url, **kw)
    except httpx.TimeoutException:
        raise EndpointError(f"{method} {url}: no answer within the timeout") from None
    except httpx.HTTPError as exc:
        raise EndpointError(f"{method} {url}: {type(exc).__name__}") from None
    if response.status_code in (401, 403):
        raise EndpointError(f"{method} {url}: HTTP {response.status_code} (the key is refused)")
    # 501 Not Implemented is an answer, not an outage: llama.cpp's chat server says so for
    # /v1/embeddings (a model that does not embed), where vLLM says 400
    transient = response.status_code >= 500 and response.status_code != 501
    if transient or response.status_code == 429:
        raise EndpointError(f"{method} {url}: HTTP {response.status_code}")
    return response


def list_models(client: httpx.Client, endpoint: DiscoveryEndpoint) -> dict[str, int | None]:
    """Model id -> the server's ``max_model_len`` (None when not given), filtered by the
    endpoint's include / exclude patterns."""
    url = endpoint.base_url.rstrip("/") + "/models"
    response = _request(client, "GET", url)
    try:
        data = response.json()["data"]
        models = {str(m["id"]): m.get("max_model_len") for m in data}
    except Exception:
        raise EndpointError(
            f"GET {url}: malformed model list (HTTP {response.status_code}, expected "
            '{"data": [{"id": ...}, ...]})'
        ) from None
    return {
        m: (int(n) if isinstance(n, int) and n > 0 else None)
        for m, n in sorted(models.items())
        if any(fnmatch.fnmatchcase(m, p) for p in endpoint.include)
        and not any(fnmatch.fnmatchcase(m, p) for p in endpoint.exclude)
    }


def probe(
    client: httpx.Client, endpoint: DiscoveryEndpoint, model_id: str
) -> tuple[int | None, str]:
    """(the vector's dimension, what was seen): a dimension when the model embeds, None when
    the server answers that it does not (a 4xx, or a body without a vector)."""
    url = endpoint.base_url.rstrip("/") + "/embeddings"
    response = _request(client, "POST", url, json={"model": model_id, "input": [PROBE_TEXT]})
    if response.status_code != 200:
        first = (response.text.strip().splitlines() or [""])[0][:160]
        return None, f"HTTP {response.status_code}: {first}"
    try:
        vector = response.json()["data"][0]["embedding"]
        if not vector or not all(isinstance(x, int | float) for x in vector):
            raise ValueError
    except Exception:
        return None, "HTTP 200 without an embedding vector"
    return len(vector), f"a {len(vector)}-dimensional vector"


def proposed_entry(
    endpoint: DiscoveryEndpoint, model_id: str, name: str, max_model_len: int | None
) -> dict[str, Any]:
    """The registry entry of a discovered embedding model: the endpoint's template, then its
    backend, server and model (what the template cannot change)."""
    t = dict(endpoint.template)
    params: dict[str, Any] = {"backend": "openai", "model": model_id}
    for key in ("long_text", "query_prompt", "doc_prompt"):
        if key in t:
            params[key] = t.pop(key)
    embedder = dict(t.pop("embedder", {}) or {})
    if max_model_len and "max_input_tokens" not in embedder:
        embedder["max_input_tokens"] = max_model_len
    embedder["base_url"] = endpoint.base_url
    if endpoint.api_key_env:
        embedder["api_key_env"] = endpoint.api_key_env
    params["embedder"] = embedder
    entry = {
        "name": name,
        "kind": "dense",
        "description": f"{model_id} on {endpoint.name} ({endpoint.base_url}), discovered",
        "params": params,
        **{k: t.pop(k) for k in ("settings", "full_corpus") if k in t},
        "meta": {"model_id": model_id, "max_tokens": max_model_len, "backend": "openai-compatible"},
    }
    where = f"discovery.endpoints[{endpoint.name}].template"
    if t:
        raise ValueError(
            f"{where}: unknown keys {sorted(t)} (known: settings, full_corpus, long_text, "
            "query_prompt, doc_prompt, embedder)"
        )
    if params.get("long_text", "average") not in LONG_TEXT:
        raise ValueError(f"{where}: long_text {params['long_text']!r} is not one of {LONG_TEXT}")
    RetrieverEntry.model_validate(entry)  # a bad template fails here, not in a run
    return entry


def discovered(db: StoreDB) -> pl.DataFrame:
    """Every discovered row, in name order."""
    ensure_table(db, TABLE)
    return db.frame(
        "SELECT name, endpoint, base_url, model_id, status, entry, dimension, max_model_len, "
        f"probe, first_seen, last_seen FROM {TABLE} ORDER BY name"
    )


def _insert(db: StoreDB, row: dict) -> None:
    entry = row["entry"]
    row = {**row, "entry": None if entry is None else json.dumps(entry)}
    schema = {"dimension": pl.Int64, "max_model_len": pl.Int64, "entry": pl.String}
    db.insert_ignore(TABLE, pl.DataFrame([row], schema_overrides=schema), json_columns=["entry"])


def _set(db: StoreDB, name: str, **values) -> None:
    cols = ", ".join(f"{k} = ?" for k in values)
    db.execute(f"UPDATE {TABLE} SET {cols} WHERE name = ?", [*values.values(), name])


def tick(
    db: StoreDB,
    endpoints: list[DiscoveryEndpoint],
    file_names: set[str],
    client_for: Callable[[DiscoveryEndpoint], httpx.Client] | None = None,
    now: datetime | None = None,
) -> Tick:
    """One discovery pass over every endpoint (see the module's docstring)."""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    out = Tick()
    rows = {r["name"]: r for r in discovered(db).iter_rows(named=True)}
    for ep in endpoints:
        try:
            with (client_for or default_client)(ep) as client:
                _tick_endpoint(db, ep, client, rows, file_names, now, out)
        except EndpointError as exc:
            out.skipped[ep.name] = str(exc)
    return out


def default_client(endpoint: DiscoveryEndpoint) -> httpx.Client:
    return httpx.Client(timeout=endpoint.timeout_s, headers=_headers(endpoint))


def _tick_endpoint(db, ep, client, rows, file_names, now, out: Tick) -> None:
    models = list_models(client, ep)  # raises before anything is written
    mine = {r["model_id"]: r for r in rows.values() if r["endpoint"] == ep.name}
    for model_id, max_len in models.items():
        row = mine.get(model_id)
        name = discovered_name(ep.name, model_id)
        if row is None:
            dim, seen = probe(client, ep, model_id)
            status = "chat" if dim is None else ("shadowed" if name in file_names else "proposed")
            try:
                entry = proposed_entry(ep, model_id, name, max_len) if dim else None
            except ValueError as exc:  # the template: a config error, said every tick
                raise EndpointError(str(exc).splitlines()[0]) from None
            _insert(db, {
                "name": name, "endpoint": ep.name, "base_url": ep.base_url,
                "model_id": model_id, "status": status, "entry": entry, "dimension": dim,
                "max_model_len": max_len, "probe": seen, "first_seen": now, "last_seen": now,
            })  # fmt: skip
            {"chat": out.chat, "shadowed": out.shadowed, "proposed": out.proposed}[status].append(
                model_id if status == "chat" else name
            )
            continue
        status = row["status"]
        if status in ("proposed", "gone", "shadowed"):
            wanted = "shadowed" if name in file_names else "proposed"
            if status == "gone" and wanted == "proposed":
                out.returned.append(name)
            elif status != wanted and wanted == "shadowed":
                out.shadowed.append(name)
            status = wanted
        _set(db, row["name"], status=status, last_seen=now)
    for model_id, row in mine.items():
        if model_id not in models and row["status"] in ("proposed", "shadowed"):
            _set(db, row["name"], status="gone")
            out.gone.append(row["name"])


# ---------------------------------------------------------------------- the effective registry


def effective_registry(path: str | Path, db: StoreDB | None = None) -> list[RetrieverEntry]:
    """The file's entries, then the discovered ones in the registry (proposed, gone) whose name
    the file does not use; without stores (discovery off), the file's alone."""
    entries = load_registry(path)
    if db is None:
        return entries
    names = {e.name for e in entries}
    for r in discovered(db).iter_rows(named=True):
        if r["status"] not in IN_REGISTRY or r["name"] in names:
            continue
        entry = RetrieverEntry.model_validate(read_json(r["entry"]))
        entry.discovered = DiscoveredFrom(
            endpoint=r["endpoint"], model_id=r["model_id"], status=r["status"],
            first_seen=str(r["first_seen"])[:19], last_seen=str(r["last_seen"])[:19],
        )  # fmt: skip
        entries.append(entry)
    return entries


def registry_for(
    cfg: PipelineConfig, db: StoreDB | None = None, home: Path | None = None
) -> list[RetrieverEntry]:
    """The effective registry of a config: the file's entries, and with discovery endpoints
    configured the discovered ones (from ``db``, else the config's stores under ``home``)."""
    path = cfg.retrievers.registry_path()
    if not cfg.discovery.endpoints:
        return load_registry(path)
    return effective_registry(path, db or open_stores(cfg, home))


def adopt(db: StoreDB, name: str, registry_path: Path) -> dict:
    """Append a discovered entry to the registry file (as YAML, the file keeps its comments) and
    mark the row adopted; an unknown or chat-only name is an error that says which names exist."""
    import yaml

    rows = {r["name"]: r for r in discovered(db).iter_rows(named=True)}
    row = rows.get(name)
    if row is None or row["entry"] is None:
        known = ", ".join(n for n, r in rows.items() if r["entry"] is not None) or "none"
        raise ValueError(f"no discovered embedding model named {name!r} (discovered: {known})")
    if name in {e.name for e in load_registry(registry_path)}:
        raise ValueError(f"{registry_path} already has an entry named {name!r}")
    entry = read_json(row["entry"])
    block = yaml.safe_dump([entry], sort_keys=False, allow_unicode=True, width=100)
    text = registry_path.read_text()
    lines = "".join("  " + line + "\n" for line in block.splitlines())
    with written_whole(registry_path) as tmp:
        tmp.write_text(text.rstrip("\n") + "\n" + lines)
        load_registry(tmp)  # the new file reads, or the old one stays as it was
    _set(db, name, status="adopted")
    return entry


def registered_entry(pipeline: PipelineResource, name: str, db=None) -> tuple[list, RetrieverEntry]:
    """(the registry, the named entry); a name no longer registered is an error that says so."""
    entries = registry_for(pipeline.load(), db, pipeline.home_dir())
    entry = next((e for e in entries if e.name == name), None)
    if entry is None:
        raise ValueError(
            f"retriever {name!r} is no longer in the registry: its earlier outputs are kept, nothing to run"
        )
    return entries, entry


def entry_settings(pipeline: PipelineResource, entry: RetrieverEntry) -> list[str]:
    """The retrieval pipeline an entry runs in: the configured ones it does not opt out of."""
    return [
        x
        for x in pipeline.load().retrievers.settings
        if entry.settings is None or x in entry.settings
    ]
