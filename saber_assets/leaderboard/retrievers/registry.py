"""The retriever registry: a YAML file listing retrievers by name, kind and parameters, validated."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from ...settings import REPO_ROOT
from .approach0 import Approach0Retriever
from .lexical import BM25Retriever, JaccardRetriever, TfidfRetriever

DEFAULT_REGISTRY = REPO_ROOT / "retrievers.yaml"

KINDS: dict[str, Any] = {
    "bm25": BM25Retriever,
    "tfidf": TfidfRetriever,
    "jaccard": JaccardRetriever,
    "approach0": Approach0Retriever,
}


class RetrieverEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    description: str = ""


class RegistryError(ValueError):
    pass


def load_registry(path: str | Path | None = None) -> list[RetrieverEntry]:
    path = Path(path or DEFAULT_REGISTRY)
    if not path.exists():
        raise RegistryError(f"retriever registry not found: {path}")
    raw = yaml.safe_load(path.read_text()) or {}
    entries = raw.get("retrievers")
    if not isinstance(entries, list) or not entries:
        raise RegistryError(f"{path}: expected a non-empty list under 'retrievers'")
    out = []
    for k, e in enumerate(entries):
        try:
            entry = RetrieverEntry.model_validate(e)
        except Exception as exc:
            raise RegistryError(f"{path}: entry {k + 1}: {exc}") from None
        if entry.kind not in KINDS:
            raise RegistryError(
                f"{path}: entry {entry.name!r}: unknown kind {entry.kind!r} (kinds: {', '.join(sorted(KINDS))})"
            )
        out.append(entry)
    names = [e.name for e in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise RegistryError(f"{path}: duplicate retriever names {dupes}")
    for e in out:  # constructing checks the parameters now, not in the middle of a run
        build_retriever(e)
    return out


def build_retriever(entry: RetrieverEntry):
    try:
        return KINDS[entry.kind](name=entry.name, **entry.params)
    except TypeError as exc:
        raise RegistryError(
            f"retriever {entry.name!r}: bad parameters {entry.params}: {exc}"
        ) from None


def find(name: str, path: str | Path | None = None) -> RetrieverEntry:
    for e in load_registry(path):
        if e.name == name:
            return e
    raise RegistryError(f"no retriever named {name!r} in the registry")
