"""A registry entry as validated: a retriever's name, kind and parameters, the model it runs, the
corpora it was trained on and where it was discovered. Data only: building a retriever from an
entry is the registry's (``registry.py``), so what reads entries does not run every kind."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from saber_assets.config import BUNDLED_SOURCES


class TrainingCorpus(BaseModel):
    """A corpus a model was trained on, with its text where it can be read: a local JSONL /
    Parquet file in the corpus source format (``path`` + ``fields``), a bundled source, or a Hub
    dataset id (read when online). Only rows whose native id starts with ``id_prefix`` (e.g.
    MATH's ``train/``) count. A name alone is declared, not checked."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9_\-]+$")
    path: str | None = None
    fields: dict[str, str] | None = None
    bundled: str | None = None
    hub: str | None = None
    id_prefix: str | None = None

    @model_validator(mode="after")
    def _one_origin(self) -> TrainingCorpus:
        origins = [k for k in ("path", "bundled", "hub") if getattr(self, k) is not None]
        if len(origins) > 1:
            raise ValueError(
                f"training corpus {self.name!r}: give at most one of path, bundled, hub "
                f"(given: {', '.join(origins)})"
            )
        if self.bundled is not None and self.bundled not in BUNDLED_SOURCES:
            raise ValueError(
                f"training corpus {self.name!r}: unknown bundled source {self.bundled!r} "
                f"(bundled: {sorted(BUNDLED_SOURCES)})"
            )
        if (self.path or self.hub) and not {"id", "problem"} <= set(self.fields or {}):
            raise ValueError(
                f"training corpus {self.name!r}: a path or hub corpus needs `fields` naming its "
                "`id` and `problem` columns"
            )
        return self

    def checkable(self) -> bool:
        return any(x is not None for x in (self.path, self.bundled, self.hub))

    def mapping(self) -> dict[str, str]:
        """Its id and problem columns (a bundled source's own, overridden by ``fields``)."""
        base = dict(BUNDLED_SOURCES[self.bundled][1]) if self.bundled else {}
        base.update(self.fields or {})
        return {k: base[k] for k in ("id", "problem") if k in base}


class ModelMeta(BaseModel):
    """What a user filters a leaderboard on, after MTEB's ``ModelMeta``: never read by scoring."""

    model_config = ConfigDict(extra="forbid")

    model_id: str | None = None  # what a server or client is given
    revision: str | None = None  # null until an online run resolves and records it
    access: Literal["open", "api"] | None = None  # open weights, or a paid API
    license: str | None = None
    n_parameters: int | None = None
    max_tokens: int | None = None  # the model's documented input limit
    backend: str | None = None  # how the reference code ran it
    paper_system: str | None = None  # its name in the paper's tables
    variant: str = "reference"  # "reference" (the paper's protocol) or e.g. "vendor-prompts"
    # declared training corpora: a name (declared, not checked) or a corpus with its text
    training_data: list[str | TrainingCorpus] = Field(default_factory=list)
    reference: str | None = None  # the model card or paper
    notes: str = ""


class DiscoveredFrom(BaseModel):
    """Where a discovered entry came from (``retrievers/discovery.py``); never in a file."""

    endpoint: str
    model_id: str
    status: str  # proposed | gone
    first_seen: str
    last_seen: str


class RetrieverEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    # Restrict to some settings (e.g. a CPU embedder on statements only); default: all.
    settings: list[str] | None = None
    # false: skip the full-corpus track for this entry (e.g. a CPU embedder over every document)
    full_corpus: bool = True
    # an opt-in variant (e.g. the vendors' prompts): run by name or with --opt-in only
    opt_in: bool = False
    meta: ModelMeta = Field(default_factory=ModelMeta)
    # set for entries found on an inference server, by the effective registry only
    discovered: DiscoveredFrom | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _no_secrets(self) -> RetrieverEntry:
        # a registry is a file people commit and its params go into index manifests and run
        # metadata: a key has to come from the environment
        for where in secret_keys(self.params, "params"):
            raise ValueError(
                f"retriever {self.name!r}: {where} holds a secret in the registry; name the "
                "environment variable holding it instead (e.g. `api_key_env`)"
            )
        return self

    def definition(self) -> dict:
        """The entry without its description of the model (``meta``), its opt-in flag and where
        it was discovered: what keys its index and its build steps, as before any existed."""
        return self.model_dump(exclude={"meta", "opt_in", "discovered"})

    @property
    def origin(self) -> str:
        return f"discovered on {self.discovered.endpoint}" if self.discovered else "file"


SECRET_KEY = re.compile(r"(api_?key|token|password|passwd|secret|dsn)$", re.IGNORECASE)


def secret_keys(value: Any, where: str) -> list[str]:
    """The paths of keys in ``value`` that would hold a secret itself (``api_key``, ``token``…),
    not the name of the variable holding it (``api_key_env``)."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{where}.{key}"
            if SECRET_KEY.search(str(key)) and inner not in (None, ""):
                found.append(path)
            found += secret_keys(inner, path)
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            found += secret_keys(inner, f"{where}[{i}]")
    return found


class RegistryError(ValueError):
    pass
