"""The asset graph as a reviewed artefact, and the layers as a rule.

``test_the_asset_graph_matches_its_snapshot``: asset keys, groups, deps, partitions, what each
code version hashes, and the jobs' selections of ``make_definitions(configs/sample.yaml)``
against ``tests/snapshots/asset_graph.json``. A changed graph is a reviewed snapshot change:
``SABER_UPDATE_SNAPSHOT=1 uv run pytest tests/test_graph.py`` rewrites it, and the diff is
part of the change.

``test_imports_read_top_to_bottom``: settings → resources → stage logic → stage assets →
definitions / sensors / schedules / build / CLI; no import cycle (function-level imports count),
no `assets` module imported as a library, no private name imported from another module.
"""

import ast
import json
import os
from pathlib import Path

import pytest

from saber_assets.definitions import make_definitions
from saber_assets.settings import DEFAULT_CONFIG, REPO_ROOT
from saber_assets.stages import ASSET_INPUTS, STAGES

SNAPSHOT = Path(__file__).parent / "snapshots" / "asset_graph.json"


def _partitions(pd) -> dict | None:
    if pd is None:
        return None
    kind = type(pd).__name__
    if kind == "MultiPartitionsDefinition":
        return {"multi": {d.name: _partitions(d.partitions_def) for d in pd.partitions_defs}}
    if kind == "DynamicPartitionsDefinition":
        return {"dynamic": pd.name}
    return {"static": pd.get_partition_keys()}


def graph_snapshot() -> dict:
    defs = make_definitions(DEFAULT_CONFIG)
    graph = defs.resolve_asset_graph()
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        name = key.to_user_string()
        inputs = ASSET_INPUTS.get(name)
        assets[name] = {
            "group": node.group_name,
            "deps": sorted(p.to_user_string() for p in node.parent_keys),
            "partitions": _partitions(node.partitions_def),
            "observable": node.is_observable,
            "code_version_hashes": (
                {"config": list(inputs.config), "code": list(inputs.code), "upstream": True}
                if inputs
                else None
            ),
            "has_code_version": node.code_version is not None,
        }
    jobs = {}
    for job in sorted(defs.jobs, key=lambda j: j.name):
        resolved = defs.resolve_job_def(job.name)
        keys = resolved.asset_layer.selected_asset_keys
        jobs[job.name] = sorted(k.to_user_string() for k in keys)
    return {"assets": assets, "jobs": jobs}


def test_the_asset_graph_matches_its_snapshot():
    got = graph_snapshot()
    if os.environ.get("SABER_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(SNAPSHOT.read_text())
    assert got == want, (
        "the asset graph changed: review it and rewrite the snapshot with "
        "SABER_UPDATE_SNAPSHOT=1 uv run pytest tests/test_graph.py"
    )


def test_every_asset_is_in_one_stage_and_says_what_its_version_hashes():
    graph = make_definitions(DEFAULT_CONFIG).resolve_asset_graph()
    materialised = {
        k.to_user_string() for k in graph.get_all_asset_keys() if graph.get(k).is_materializable
    }
    staged = [a for s in STAGES for a in s.assets]
    assert sorted(staged) == sorted(materialised)  # each exactly once
    assert set(ASSET_INPUTS) == materialised
    assert all(graph.get(k).code_version for k in graph.get_all_asset_keys()
               if k.to_user_string() in materialised)  # fmt: skip


# ---- layers -------------------------------------------------------------------------------

PACKAGES = ("saber_assets", "saber_resources")
STAGE_PACKAGES = {
    "corpus", "ontology", "annotations", "signals", "candidates", "tournament", "ratings",
    "leaderboard", "analyses",
}  # fmt: skip
TOP = {"definitions", "sensors", "schedules", "build", "cli", "remote"}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (REPO_ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(REPO_ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = f
    return out


def layer(module: str) -> int:
    """0 settings, 1 resources, 2 stage logic and shared helpers, 3 stage assets, 4 the top."""
    parts = module.split(".")
    if parts[0] == "saber_resources" or module == "saber_assets.resources":
        return 1
    if len(parts) == 1 or module == "saber_assets.settings":
        return 0
    if parts[1] in TOP:
        return 4
    if parts[-1] in ("assets", "report_assets"):
        return 3
    return 2


def imports(mods: dict[str, Path]):
    """(module, imported module, imported name) for every import, function-level ones too."""
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods:
                        yield mod, a.name, None
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = mod.split(".")
                    parts = parts[: len(parts) - node.level + (1 if is_pkg else 0)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                for a in node.names:
                    full = f"{base}.{a.name}"
                    if full in mods:
                        yield mod, full, None
                    elif base in mods:
                        yield mod, base, a.name


def test_imports_read_top_to_bottom():
    mods = modules()
    edges: dict[str, set[str]] = {}
    problems = []
    for mod, target, name in imports(mods):
        if target == mod:
            continue
        edges.setdefault(mod, set()).add(target)
        if layer(target) > layer(mod):
            problems.append(f"upward import: {mod} (layer {layer(mod)}) -> {target}")
        if layer(target) == 3 and layer(mod) < 4:
            problems.append(f"an assets module used as a library: {mod} -> {target}")
        if name and name.startswith("_"):
            problems.append(f"private name across modules: {mod} imports {target}.{name}")
    assert not problems, "\n".join(problems)
    # no cycle between modules, nor between the stage packages
    pkg_edges: dict[str, set[str]] = {}
    for a, targets in edges.items():
        for b in targets:
            pa, pb = a.split(".")[:2], b.split(".")[:2]
            if pa != pb and pa[-1] in STAGE_PACKAGES and pb[-1] in STAGE_PACKAGES:
                pkg_edges.setdefault(".".join(pa), set()).add(".".join(pb))
    for graph in (edges, pkg_edges):
        assert not find_cycle(graph), f"import cycle: {' -> '.join(find_cycle(graph))}"


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str]:
        state[v] = 1
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w) :] + [w]
            if w not in state and (found := visit(w)):
                return found
        state[v] = 2
        stack.pop()
        return []

    for v in sorted(edges):
        if v not in state and (found := visit(v)):
            return found
    return []


@pytest.mark.parametrize("planted", ["cycle", "upward"])
def test_the_layer_check_finds_a_planted_problem(planted):
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"} if planted == "cycle" else set()}
    assert bool(find_cycle(edges)) == (planted == "cycle")
    assert layer("saber_assets.corpus.assets") > layer("saber_assets.corpus.build")
    assert layer("saber_assets.definitions") > layer("saber_assets.corpus.assets")


def test_select_names_stages_by_alias_or_job_and_refuses_an_unknown_one():
    from saber_assets.build import partition_filter, selected_stages

    assert [s.job for s in selected_stages(["runs", "build_leaderboard"])] == [
        "build_runs", "build_leaderboard"
    ]  # fmt: skip
    assert [s.job for s in selected_stages(["domain=Algebra"])] == ["build_domains", "build_runs"]
    assert len(selected_stages([])) == len(STAGES)
    with pytest.raises(ValueError, match="no such stage; the stages: sources, annotations"):
        selected_stages(["signals"])  # the old alias of the thresholds stage
    runs = next(s for s in STAGES if s.job == "build_runs")
    keep = partition_filter(runs, ["Algebra"], {"bm25"})
    assert keep("Algebra|bm25") and not keep("Geometry|bm25") and not keep("Algebra|gone")


def test_a_first_partition_of_a_parent_that_had_none_makes_its_child_unsynced():
    """Dagster records no cursor for a partitioned parent none of whose partitions existed when
    the child ran, and then never calls the child stale (checked: its resolver says FRESH);
    `why_run` does, naming the partition, and says nothing once the child ran again."""
    import dagster as dg
    from dagster._core.definitions.data_version import StaleStatus

    from saber_assets.build import stale_resolver, why_run

    parts = dg.DynamicPartitionsDefinition(name="p")

    @dg.asset(partitions_def=parts, code_version="1")
    def parent() -> dg.MaterializeResult:
        return dg.MaterializeResult()

    @dg.asset(deps=[parent], code_version="1")
    def child() -> dg.MaterializeResult:
        return dg.MaterializeResult()

    graph = dg.Definitions(assets=[parent, child]).resolve_asset_graph()
    with dg.instance_for_test() as inst:
        dg.materialize([parent, child], instance=inst, selection=["child"])
        inst.add_dynamic_partitions("p", ["a"])
        dg.materialize([parent, child], instance=inst, selection=["parent"], partition_key="a")
        resolver = stale_resolver(inst, graph)
        assert resolver.get_status(dg.AssetKey("child"), None) == StaleStatus.FRESH
        assert why_run(resolver, inst, graph, "child", None) == [
            "child: has a new dependency materialization (parent [a]; none was materialised "
            "when it last ran)"
        ]
        dg.materialize([parent, child], instance=inst, selection=["child"])
        assert why_run(stale_resolver(inst, graph), inst, graph, "child", None) == []
