"""What an asset's version is made of: its Dagster ``code_version`` and the data versions of the
build's inputs. Pure: no Dagster here.

An asset's code version hashes the config sections it reads (its declaration's ``reads``), the source
of the module that defines it and of every project module that module imports, transitively
(``code_graph``: read from the source, so a new import is counted the day it is written and a
module only the CLI imports is in no asset's version), and the code versions of the assets
upstream of it. The last part makes
a change visible at once all the way down: Dagster itself marks an asset stale for its own new
code version, but a downstream asset only after the upstream one has been materialised again;
with the upstream versions folded in, changing `tournament.rounds` shows the tournament, the
ratings, the export, the runs, the leaderboard and the analyses unsynced in the UI straight away
(and nothing above the tournament). Input files and registry entries are data, not code: their
content hashes are the data versions of observable source assets (``input_versions``,
``registry_versions``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from saber_assets.code_graph import CodeGraph
from saber_assets.config import BUNDLED_ONTOLOGIES, DATA_DIR, PipelineConfig, resolve_path

SECRETS = {"api_key", "api_key_env", "dsn_env"}  # names only, but never part of a version
# how fast or in how much memory a stage runs, never what it computes (tested equal both ways)
RESOURCE_ONLY = {"signals": {"threads", "gather_memory_gib"}}
# upstream assets whose changes reach their dependents as data only, not through their code
# version: the published benchmark's matches are empty unless `candidates.published_queries`
# names one, and an edit of the matching code must not re-version every domain's candidates
# (and the runs after them) in a build that takes no published query; where it does, new
# matches are new data, and the candidates follow them
DATA_ONLY = frozenset({"published_matches"})
# where an input file lies, never what it holds: its content is the data version of the source
# asset that observes it (corpus_sources, ontology_files, retriever_registry), so a moved
# checkout, input folder or copied SABER_HOME stays up to date
INPUT_PATHS = {"ontology": {"path", "nodes", "edges"}, "retrievers": {"registry"}}


def digest(obj) -> str:
    data = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def config_part(cfg: PipelineConfig, dotted: str):
    """One config section as the versions see it: without secrets and resource-only settings;
    the `prompts` section by the templates' contents, not their paths."""
    if dotted == "prompts":
        return {task: file_stamp(Path(p)) for task, p in sorted(cfg.prompt_paths().items())}
    value = cfg.model_dump(
        exclude={
            "llm": SECRETS,
            "stores": SECRETS,
            **RESOURCE_ONLY,
            **INPUT_PATHS,
            "corpus": {"sources": {"__all__": {"path"}}},
        }
    )
    for part in dotted.split("."):
        value = value[part]
    return value


def code_digest(modules: Iterable[str], graph: CodeGraph | None = None) -> str:
    """Hash of the source the modules run: theirs and every project module they import."""
    graph = graph or CodeGraph.of_checkout()
    return graph.digest(graph.closure(modules))


def file_stamp(path: Path) -> str:
    """Content hash of an input file (corpus source, ontology, prompt template), or of a folder
    read as one source (a dataset snapshot): every file in it, by relative name and content."""
    h = hashlib.blake2b(digest_size=12)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            h.update(file.relative_to(path).as_posix().encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda f=f: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def asset_code_versions(
    cfg: PipelineConfig,
    parents: Mapping[str, Iterable[str]],
    modules: Mapping[str, str],
    reads: Mapping[str, tuple[str, ...]],
    graph: CodeGraph | None = None,
) -> dict[str, str]:
    """Asset name -> its code version, for every asset of ``reads``.

    ``parents``: asset name -> the names of the assets it depends on (source assets among them
    are skipped: their changes arrive as data versions). ``modules``: asset name -> the module
    that defines it. ``reads``: asset name -> the config sections it depends on (declared with
    it). ``graph``: the source read (the checkout's by default)."""
    graph = graph or CodeGraph.of_checkout()
    missing = sorted(set(reads) - set(modules))
    if missing:
        raise ValueError(f"no defining module for {missing}")
    code: dict[str, str] = {}
    out: dict[str, str] = {}

    def version(name: str, seen: tuple[str, ...] = ()) -> str:
        if name in out:
            return out[name]
        if name in seen:
            raise ValueError(f"asset graph cycle through {' -> '.join((*seen, name))}")
        module = modules[name]
        if module not in code:
            code[module] = code_digest([module], graph)
        ups = sorted(
            version(p, (*seen, name))
            for p in parents.get(name, ())
            if p in reads and p not in DATA_ONLY
        )
        out[name] = digest(
            {
                "config": {s: config_part(cfg, s) for s in reads[name]},
                "code": code[module],
                "upstream": ups,
            }
        )
        return out[name]

    for name in reads:
        version(name)
    return out


def ontology_files(cfg: PipelineConfig) -> dict[str, Path]:
    """The files the ontology is read from (the bundled file, or the configured ones), by role."""
    o = cfg.ontology
    if o.bundled:
        return {o.bundled: DATA_DIR / BUNDLED_ONTOLOGIES[o.bundled]}
    return {
        k: resolve_path(p)
        for k, p in (("path", o.path), ("nodes", o.nodes), ("edges", o.edges))
        if p
    }


def files_version(files: Mapping[str, Path]) -> str:
    """One data version for a set of input files, each under the name of the role it plays (a
    source's name, `nodes`): their content hashes, not where they lie (a missing file counts as
    missing, so that its reappearance moves the version too)."""
    return digest(
        [
            [k, file_stamp(Path(p)) if Path(p).exists() else "missing"]
            for k, p in sorted(files.items())
        ]
    )


def input_versions(cfg: PipelineConfig) -> dict[str, str]:
    """Data versions of the unpartitioned observable source assets."""
    return {
        "corpus_sources": files_version({s.name: s.file() for s in cfg.corpus.sources}),
        "ontology_files": files_version(ontology_files(cfg)),
    }


def registry_versions(registry: Mapping[str, dict]) -> dict[str, str]:
    """Retriever name -> the data version of its `retriever_registry` partition: its entry and,
    for a fusion, the entries it fuses (recursively), so that changing one entry moves exactly
    the partitions that read it."""
    return {name: digest([registry.get(n) for n in closure(name, registry)]) for name in registry}


def closure(name: str, registry: Mapping[str, dict]) -> list[str]:
    """A retriever and the components it fuses (recursively)."""
    out = [name]
    for comp in registry.get(name, {}).get("params", {}).get("retrievers", []) or []:
        out += closure(comp, registry)
    return out
