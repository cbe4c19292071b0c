"""The build plan with fingerprints: which (job, partition) runs a build needs, and which are
already up to date.

A step's fingerprint hashes what its outputs depend on: the config sections its stage reads, the
source code of the packages that compute it (a code version), the input files it reads (corpus
sources, ontology) and the fingerprints of the steps upstream of it. A step whose last
successful run carries the same fingerprint (run tag ``saber/fingerprint``) is skipped; anything
upstream that changes changes every fingerprint below it. Pure: no Dagster here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from saber_assets.settings import PipelineConfig

PACKAGE = Path(__file__).resolve().parent.parent
RESOURCES = PACKAGE.parent / "saber_resources"

# job -> (config sections it reads, source folders/files that compute it)
STAGES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "build_sources": (("seed", "corpus", "ontology"), ("corpus", "ontology")),
    "build_annotations": (("llm", "annotations"), ("annotations", "saber_resources")),
    "build_annotation_summaries": (("signals.freeze_ic",), ("annotations", "signals/prepare.py")),
    "build_signal_shards": (("signals",), ("signals",)),
    "build_signal_index": (("signals", "candidates"), ("signals",)),
    "build_domains": (
        ("seed", "candidates", "tournament", "llm"),
        ("candidates", "tournament", "ratings", "saber_resources"),
    ),
    "build_benchmark": (("seed", "leaderboard.benchmark"), ("leaderboard/assets.py",)),
    "build_indexes": (
        ("leaderboard.settings", "leaderboard.full_corpus"),
        ("leaderboard/indexes.py", "leaderboard/retrievers", "saber_resources"),
    ),
    "build_runs": (
        ("leaderboard.settings", "leaderboard.k", "leaderboard.full_corpus", "llm"),
        ("leaderboard", "saber_resources"),
    ),
    "build_leaderboard": (("seed", "leaderboard"), ("leaderboard",)),
    "build_analyses": (("seed", "analyses", "robustness"), ("analyses",)),
}
# upstream job of each job: a step depends on every step of its upstream job, except a run,
# which depends on its own retriever's index steps only (a new retriever reruns nothing else)
UPSTREAM = {
    "build_annotations": "build_sources",
    "build_annotation_summaries": "build_annotations",
    "build_signal_shards": "build_annotation_summaries",
    "build_signal_index": "build_signal_shards",
    "build_domains": "build_signal_index",
    "build_benchmark": "build_domains",
    "build_indexes": "build_benchmark",
    "build_runs": "build_indexes",
    "build_leaderboard": "build_runs",
    "build_analyses": "build_leaderboard",
}
SECRETS = {"api_key", "api_key_env", "dsn_env"}  # names only, but never part of a fingerprint
# how fast or in how much memory a stage runs, never what it computes (tested equal both ways)
RESOURCE_ONLY = {"signals": {"threads", "gather_memory_gib"}}


def _digest(obj) -> str:
    data = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def config_part(cfg: PipelineConfig, dotted: str):
    value = cfg.model_dump(exclude={"llm": SECRETS, "stores": SECRETS, **RESOURCE_ONLY})
    for part in dotted.split("."):
        value = value[part]
    return value


def code_version(paths: Iterable[str]) -> str:
    """Hash of the source files under the given package-relative paths."""
    h = hashlib.blake2b(digest_size=12)
    for rel in sorted(paths):
        root = RESOURCES if rel == "saber_resources" else PACKAGE / rel
        files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
        for f in files:
            h.update(str(f.relative_to(PACKAGE.parent)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def file_stamp(path: Path) -> str:
    """Content hash of an input file (corpus source, ontology)."""
    h = hashlib.blake2b(digest_size=12)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class Step:
    job: str
    partition: str | None
    fingerprint: str
    upstream: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.job + (f" [{self.partition}]" if self.partition else "")


def plan(
    cfg: PipelineConfig,
    partitions: dict[str, Sequence[str | None]],
    input_files: Sequence[Path] = (),
    registry: dict[str, dict] | None = None,
) -> list[Step]:
    """Every step of the build, in order, with its fingerprint.

    ``partitions``: job -> its partition keys (None for an unpartitioned job). ``registry``:
    retriever name -> its entry (a run's fingerprint includes its own entry and, for fusion, its
    components'; the leaderboard's includes every entry)."""
    registry = registry or {}
    steps: list[Step] = []
    done: dict[str, dict[str | None, str]] = {}
    inputs = [file_stamp(p) for p in input_files]
    for job, (sections, code) in STAGES.items():
        upstream = list(done.get(UPSTREAM.get(job, ""), {}).values())
        base = {
            "job": job,
            "config": {s: config_part(cfg, s) for s in sections},
            "code": code_version(code),
            "upstream": upstream,
        }
        if job == "build_sources":
            base["inputs"] = inputs
        if job == "build_leaderboard":
            base["registry"] = registry
        fps: dict[str | None, str] = {}
        for key in partitions.get(job, [None]):
            extra, ups = {}, upstream
            if job == "build_indexes" and key is not None:
                extra["retriever"] = registry.get(key, {})
            if job == "build_runs" and key is not None:
                # the key is "domain|retriever" (Dagster orders the dimensions by name)
                names = _closure_names(key.split("|")[-1], registry)
                extra["retriever"] = [registry.get(n, {}) for n in names]
                indexes = done.get("build_indexes", {})
                ups = [indexes[n] for n in names if n in indexes]
                extra["upstream"] = ups
            fp = _digest({**base, "partition": key, **extra})
            steps.append(Step(job, key, fp, ups))
            fps[key] = fp
        done[job] = fps
    return steps


def _closure_names(name: str, registry: dict[str, dict]) -> list[str]:
    """A retriever and the components it fuses (recursively)."""
    out = [name]
    for comp in registry.get(name, {}).get("params", {}).get("retrievers", []) or []:
        out += _closure_names(comp, registry)
    return out
