"""The retriever registry: a YAML file listing retrievers by name, kind and parameters, validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from saber_assets.config import REPO_ROOT
from saber_assets.retrievers import approach0, dense, fusion, lexical, two_stage
from saber_assets.retrievers.base import Kind
from saber_assets.retrievers.dense import cpu_reranker
from saber_assets.retrievers.entries import (
    RegistryError,
    RetrieverEntry,
)
from saber_resources.yaml_text import read_yaml

DEFAULT_REGISTRY = REPO_ROOT / "retrievers.yaml"

# every kind, as its own module declares it (a new kind module: one line here)
KIND_MODULES = (lexical, approach0, dense, two_stage, fusion)
KINDS: dict[str, Kind] = {k.name: k for module in KIND_MODULES for k in module.KINDS}


def load_registry(path: str | Path | None = None) -> list[RetrieverEntry]:
    path = Path(path or DEFAULT_REGISTRY)
    if not path.exists():
        raise RegistryError(f"retriever registry not found: {path}")
    raw = read_yaml(path, f"registry {path}") or {}
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
    by_name = {x.name: x for x in out}
    for e in out:  # check the parameters now, not in the middle of a run (no model is loaded)
        _check_params(e, by_name)
    return out


def definitions_by_name(entries: list[RetrieverEntry]) -> dict[str, dict]:
    """Retriever name -> its registry entry as it is hashed and stored."""
    return {e.name: e.definition() for e in entries}


def _check_params(entry: RetrieverEntry, by_name: dict[str, RetrieverEntry]) -> None:
    import inspect

    internal = {"name", "embedding_cache", "judge", "components", "translator"}
    kind = KINDS[entry.kind]
    accepted = set(inspect.signature(kind.make).parameters) - internal
    if kind.fuses:
        accepted.add("retrievers")
    extra = set(entry.params) - accepted
    if extra:
        raise RegistryError(
            f"retriever {entry.name!r}: bad parameters {sorted(extra)} (accepted: {sorted(accepted)})"
        )
    if kind.fuses:
        comps = entry.params.get("retrievers") or []
        unknown = [c for c in comps if c not in by_name or c == entry.name]
        if len(comps) < 2 or unknown:
            raise RegistryError(
                f"fusion {entry.name!r}: needs >= 2 other registered retrievers (unknown: {unknown})"
            )


def components_of(
    entry: RetrieverEntry, entries: list[RetrieverEntry]
) -> list[tuple[str, RetrieverEntry | None]]:
    """The retrievers a fusion combines, by name, each with its registry entry (None where the
    registry holds none); an entry of any other kind has none."""
    if not KINDS[entry.kind].fuses:
        return []
    by_name = {e.name: e for e in entries}
    return [(c, by_name.get(c)) for c in entry.params.get("retrievers", [])]


def models_of(
    entry: RetrieverEntry, entries: list[RetrieverEntry], llm_model: str = "cpu"
) -> set[str]:
    """The neural models a registered retriever relies on (CPU backend: the two-stage re-ranker
    is the e5 cosine re-ranker; an LLM backend re-ranks with ``llm_model``)."""
    kind = KINDS[entry.kind]
    if kind.fuses:
        return set().union(
            *(models_of(c, entries, llm_model) for _, c in components_of(entry, entries))
        )
    return kind.models(entry, llm_model) if kind.models else set()


def model_of(entry: RetrieverEntry) -> tuple[str, str | None, str]:
    """(model id, revision, backend) of an entry, from the entry alone (no model is loaded): what
    its kind says (an embedding model's id and revision), else the kind's own name."""
    kind = KINDS[entry.kind]
    if kind.model_of:
        return kind.model_of(entry)
    return entry.kind, None, str(entry.params.get("method", entry.kind))


def unavailable_reason(entry: RetrieverEntry, entries: list[RetrieverEntry]) -> str | None:
    """Why this entry cannot run here, in one line, or None when it can: a backend without its
    package, its GPU or its API key (checked without loading any model), or a component that
    cannot."""
    kind = KINDS[entry.kind]
    if kind.unavailable and (why := kind.unavailable(entry)):
        return why
    for name, c in components_of(entry, entries):
        why = unavailable_reason(c, entries) if c is not None else "not registered"
        if why:
            return f"component {name!r}: {why}"
    return None


def runnable(
    entries: list[RetrieverEntry], opt_in: bool = False
) -> tuple[list[RetrieverEntry], list[tuple[str, str]]]:
    """(the entries that can run here, (name, reason) for each one that cannot): an opt-in
    variant unless ``opt_in``, or a backend without its package, GPU or API key."""
    run, skipped = [], []
    for e in entries:
        why = unavailable_reason(e, entries)
        if e.opt_in and not opt_in:
            why = "an opt-in variant"
        if e.discovered and e.discovered.status == "gone":
            why = f"gone from {e.discovered.endpoint} (last seen {e.discovered.last_seen})"
        if why:
            skipped.append((e.name, why))
        else:
            run.append(e)
    return run, skipped


def needs_judge(entry: RetrieverEntry, entries: list[RetrieverEntry]) -> bool:
    """Whether running the entry asks the pointwise judge: a two-stage retriever, or a fusion
    with one among its components (recursively)."""
    return KINDS[entry.kind].judges or any(
        needs_judge(c, entries) for _, c in components_of(entry, entries)
    )


@dataclass
class RetrieverResources:
    """What some retrievers need from the platform: the embedding cache, the pointwise judge, and
    the registry itself (fusion builds its components from it)."""

    embedding_cache: Any = None
    pointwise_judge: Any = None
    translator: Any = None
    entries: list[RetrieverEntry] = field(default_factory=list)

    @classmethod
    def from_stores(cls, db, entries: list[RetrieverEntry], tasks=None) -> RetrieverResources:
        """What the assets and the commands give the retrievers: the embedding cache in the
        config's stores and, with an LLM backend's ``tasks``, its pointwise judge and translator.
        The CPU backend's judge is never a contestant: two-stage retrievers then get a
        retriever-side re-ranker (``build_retriever``)."""
        from saber_resources.cache import EmbeddingCache

        judge = tasks.pointwise_judge if tasks is not None else None
        return cls(
            embedding_cache=EmbeddingCache(db),
            pointwise_judge=judge if judge is not None and judge.backend != "cpu" else None,
            translator=tasks.translator if tasks is not None else None,
            entries=entries,
        )


def build_retriever(entry: RetrieverEntry, resources: RetrieverResources | None = None):
    res = resources or RetrieverResources()
    params = dict(entry.params)
    kind = KINDS[entry.kind]
    try:
        if kind.embeds:
            params["embedding_cache"] = res.embedding_cache
        if kind.judges:
            if res.pointwise_judge is None:
                # CPU backend: a retriever-side re-ranker (e5 cosine), never the CPU judge
                from saber_resources.cpu_tasks import CPUTranslator

                res.pointwise_judge = cpu_reranker(res.embedding_cache)
                res.translator = res.translator or CPUTranslator()
            params["judge"] = res.pointwise_judge
            if params.get("translate_to"):
                params["translator"] = res.translator
        if kind.fuses:
            by_name = {e.name: e for e in res.entries}
            params["components"] = [
                build_retriever(by_name[n], res) for n in params.pop("retrievers")
            ]
        return kind.make(name=entry.name, **params)
    except (TypeError, KeyError) as exc:
        raise RegistryError(
            f"retriever {entry.name!r}: bad parameters {entry.params}: {exc}"
        ) from None


def find(name: str, path: str | Path | None = None) -> RetrieverEntry:
    for e in load_registry(path):
        if e.name == name:
            return e
    raise RegistryError(f"no retriever named {name!r} in the registry")
