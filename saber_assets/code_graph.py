"""The project's own import graph, read from the source: which project modules a module runs,
transitively. It is what an asset's code version hashes (``versions.asset_code_versions``) and
what the layer test (``tests/test_graph.py``) checks. Pure: no Dagster here."""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("saber_assets", "saber_resources")
# data files that a module reads as code: the bundled prompt templates, read by this module
TEMPLATES_READER = "saber_resources.templates"
TEMPLATES_DIR = "saber_resources/prompt_templates"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the imported project module
    name: str | None  # the name taken from it (``from target import name``), if not a module


@dataclass
class CodeGraph:
    """The modules of ``PACKAGES`` under ``root`` and the imports between them (function-level
    imports included: they run too)."""

    root: Path = ROOT

    @staticmethod
    @cache
    def of_checkout() -> CodeGraph:
        """The graph of the running checkout, read once per process."""
        return CodeGraph(ROOT)

    @cached_property
    def modules(self) -> dict[str, Path]:
        out = {}
        for pkg in PACKAGES:
            for f in sorted((self.root / pkg).rglob("*.py")):
                name = ".".join(f.relative_to(self.root).with_suffix("").parts)
                out[name.removesuffix(".__init__")] = f
        return out

    @cached_property
    def sources(self) -> dict[str, bytes]:
        """Each module's source, read once: the graph and the digests see one state of the tree."""
        return {m: path.read_bytes() for m, path in self.modules.items()}

    @cached_property
    def imports(self) -> list[Import]:
        """Every import, read from the source. Parsing every module costs about 0.4 s, at every
        start of a process that loads the definitions: the result is kept under ``.cache/`` by
        the sources' content (a changed, added or moved module is a new key; the last key only
        is kept), and a checkout that cannot be written parses every time."""
        cache = self.root / ".cache" / "code_graph" / f"{self.digest(self.modules)}.json"
        try:
            return [Import(*row) for row in json.loads(cache.read_text())]
        except (OSError, ValueError, TypeError):
            pass
        found = [i for mod in self.modules for i in self._imports_of(mod)]
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps([[i.module, i.target, i.name] for i in found]))
            tmp.replace(cache)
            for old in cache.parent.glob("*.json"):
                if old != cache:
                    old.unlink(missing_ok=True)
        except OSError:
            pass
        return found

    @cached_property
    def edges(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {m: set() for m in self.modules}
        for i in self.imports:
            if i.target != i.module:
                out[i.module].add(i.target)
        return out

    def _imports_of(self, mod: str) -> Iterator[Import]:
        path = self.modules[mod]
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(self.sources[mod], str(path))):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in self.modules:
                        yield Import(mod, a.name, None)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = mod.split(".")
                    parts = parts[: len(parts) - node.level + (1 if is_pkg else 0)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in self.modules:
                        yield Import(mod, full, None)
                    elif base in self.modules:
                        yield Import(mod, base, a.name)

    def closure(self, modules: Iterable[str]) -> frozenset[str]:
        """The modules and every project module they import, transitively (a package's
        ``__init__`` is not counted for its submodules: Python runs it, but saber's are empty
        or re-export)."""
        seen: set[str] = set()
        todo = list(modules)
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            if m not in self.modules:
                raise ValueError(f"{m} is not a module of {', '.join(PACKAGES)}")
            seen.add(m)
            todo.extend(self.edges[m])
        return frozenset(seen)

    def digest(self, modules: Iterable[str]) -> str:
        """Hash of the modules' source (and the bundled prompt templates where the templates'
        reader is among them), each under its module name: a moved checkout hashes the same."""
        mods = sorted(set(modules))
        h = hashlib.blake2b(digest_size=12)
        for m in mods:
            h.update(m.encode())
            h.update(self.sources[m])
        if TEMPLATES_READER in mods:
            for f in sorted((self.root / TEMPLATES_DIR).glob("*.yaml")):
                h.update(f.name.encode())
                h.update(f.read_bytes())
        return h.hexdigest()
