"""The asset graph as a reviewed artefact, and the layers as a rule.

``test_the_asset_graph_matches_its_snapshot``: asset keys, groups, deps, partitions, what each
code version hashes, and the jobs' selections of ``make_definitions(configs/sample.yaml)``
against ``tests/snapshots/asset_graph.json``. A changed graph is a reviewed snapshot change:
``SABER_UPDATE_SNAPSHOT=1 uv run pytest tests/test_graph.py`` rewrites it, and the diff is
part of the change.

``test_imports_read_top_to_bottom``: settings → resources → the stage table and versions → lib →
stage logic (each stage's from the earlier stages' only) → stage assets → definitions / sensors /
schedules / build / CLIs, every module in a layer; no import cycle (function-level imports count),
no `assets` module imported as a library, no private name imported from another module. The graph
is the one the code versions read (``saber_assets/code_graph.py``).
"""

import json
import os
import re
from pathlib import Path

import pytest

from saber_assets.code_graph import CodeGraph
from saber_assets.config import DEFAULT_CONFIG, REPO_ROOT
from saber_assets.definitions import asset_modules, asset_reads, make_definitions
from saber_assets.stages import STAGES

from .conftest import copy_source

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
    modules, code = asset_modules(), CodeGraph(REPO_ROOT)
    assets = {}
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        name = key.to_user_string()
        config = asset_reads().get(name)
        assets[name] = {
            "group": node.group_name,
            "deps": sorted(p.to_user_string() for p in node.parent_keys),
            "partitions": _partitions(node.partitions_def),
            "observable": node.is_observable,
            "code_version_hashes": (
                {
                    "config": list(config),
                    "code": sorted(code.closure([modules[name]])),
                    "upstream": True,
                }
                if config is not None
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
    assert set(asset_reads()) == materialised
    assert all(graph.get(k).code_version for k in graph.get_all_asset_keys()
               if k.to_user_string() in materialised)  # fmt: skip


# ---- layers -------------------------------------------------------------------------------

# the stage packages, each of whose logic may import an earlier one's, never a later one's: the
# order the build runs them, but for the ratings, whose Bradley-Terry fit the Swiss pairing runs
# between rounds, and the study before the analyses (the judge-versus-people analysis reads the
# study's labels); the site on top, showing them all (the report's vocabulary, which the analyses
# speak, is lib/sections.py)
STAGE_ORDER = (
    "corpus", "ontology", "annotations", "signals", "candidates", "ratings", "tournament",
    "benchmark", "retrievers", "runs", "contamination", "leaderboard", "study", "analyses", "site",
)  # fmt: skip
TOP = {"definitions", "declarations", "sensors", "schedules", "orchestration", "cli", "pods",
       "cost", "home_lock"}  # fmt: skip
LAYERS = ("config", "resources", "the stage table and versions", "lib", "stage logic",
          "stage assets", "the top")  # fmt: skip


def layer(module: str) -> tuple[int, int]:
    """(layer, stage) of a project module; every module has one, or the test says which has none.

    0 settings (and the package, the import graph reader); 1 resources; 2 the stage table and
    versions (pure descriptions of the build); 3 lib (helpers every stage's assets share) and the
    IO manager; 4 stage logic, by stage (``STAGE_ORDER``); 5 stage assets; 6 the top (definitions,
    sensors, schedules, the build, the CLIs)."""
    parts = module.split(".")
    if module in ("saber_resources.yaml_text", "saber_resources.home"):  # the config reads them
        return (0, 0)
    if parts[0] == "saber_resources" or module == "saber_assets.pipeline":
        return (1, 0)
    if module in ("saber_assets", "saber_assets.config", "saber_assets.config_reference",
                  "saber_assets.outputs",
                  "saber_assets.code_graph"):  # fmt: skip
        return (0, 0)
    if module in ("saber_assets.stages", "saber_assets.versions"):
        return (2, 0)
    if parts[1] in ("lib", "io_managers"):
        return (3, 0)
    if parts[1] in TOP:
        return (6, 0)
    if parts[1] in STAGE_ORDER:
        stage = STAGE_ORDER.index(parts[1])
        return (5, stage) if parts[-1].endswith("assets") else (4, stage)
    raise AssertionError(f"{module} is in no layer: give it one in tests/test_graph.py")


def layer_problems(graph: CodeGraph) -> list[str]:
    problems = []
    for i in graph.imports:
        if i.target == i.module:
            continue
        (lm, sm), (lt, st) = layer(i.module), layer(i.target)
        if lt > lm or (lt == lm == 4 and st > sm):
            problems.append(
                f"upward import: {i.module} ({LAYERS[lm]}) -> {i.target} ({LAYERS[lt]})"
            )
        if lt == 5 and lm < 6:
            problems.append(f"an assets module used as a library: {i.module} -> {i.target}")
        if i.name and i.name.startswith("_"):
            problems.append(f"private name across modules: {i.module} imports {i.target}.{i.name}")
    for edges in (graph.edges, stage_edges(graph.edges)):
        if cycle := find_cycle(edges):
            problems.append(f"import cycle: {' -> '.join(cycle)}")
    return list(dict.fromkeys(problems))


def stage_edges(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The imports between stage packages."""
    out: dict[str, set[str]] = {}
    for a, targets in edges.items():
        for b in targets:
            pa, pb = a.split(".")[:2], b.split(".")[:2]
            if pa != pb and pa[-1] in STAGE_ORDER and pb[-1] in STAGE_ORDER:
                out.setdefault(".".join(pa), set()).add(".".join(pb))
    return out


def test_imports_read_top_to_bottom():
    problems = layer_problems(CodeGraph(REPO_ROOT))
    assert not problems, "\n".join(problems)


# Loaded by the step that draws or clusters, not with the definitions that every process loads
# (each Dagster run worker, the UI's code server, every `saber` command): together 0.7 s of CPU
# of a 2.9 s start (lib/figures.pyplot, corpus/dedup).
DEFERRED = ("matplotlib", "datatrove", "huggingface_hub")


def test_loading_the_definitions_loads_no_drawing_or_clustering_library():
    import subprocess
    import sys

    code = (
        "import sys; from saber_assets.definitions import defs; "
        f"print(' '.join(m for m in {DEFERRED!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [], f"loaded with the definitions: {out.stdout.strip()}"


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


PLANTED = {
    # the four this rule missed before it knew every module kind
    "lib": ("saber_assets/lib/partitions.py", "from saber_assets.ontology.domains import domain_keys"),
    "versions": ("saber_assets/versions.py", "from saber_assets.study.human_study import stored_labels"),
    "stage order": ("saber_assets/corpus/build.py", "from saber_assets.tournament.engine import run_tournament"),
    "cycle": ("saber_assets/code_graph.py", "from saber_assets.versions import digest"),
    "private": ("saber_assets/corpus/build.py", "from saber_assets.corpus.dedup import _secret"),
}  # fmt: skip


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_the_layer_check_finds_a_planted_problem(planted, tmp_path):
    copy_source(tmp_path)
    path, line = PLANTED[planted]
    target = tmp_path / path
    target.write_text(target.read_text() + "\n\ndef planted():\n    " + line + "\n")
    problems = layer_problems(CodeGraph(tmp_path))
    assert len(problems) >= 1, planted
    want = {"cycle": "import cycle", "private": "private name"}.get(planted, "upward import")
    assert any(want in p for p in problems), problems


def test_select_names_stages_by_alias_or_job_and_refuses_an_unknown_one():
    from saber_assets.orchestration.plan import partition_filter, selected_stages

    assert [s.job for s in selected_stages(["runs", "build_leaderboard"])] == [
        "build_runs", "build_leaderboard"
    ]  # fmt: skip
    assert [s.job for s in selected_stages(["domain=Algebra"])] == ["build_domains", "build_runs"]
    assert len(selected_stages([])) == len(STAGES)
    with pytest.raises(ValueError, match="no such job or package; the jobs: sources, annotations"):
        selected_stages(["signals"])  # a package, where no package is known
    # a package selects every job building one of its assets (they cut the graph differently)
    packages = {"signals": ["pair_signal_inputs", "pair_signal_shards", "relevance_thresholds"],
                "corpus": ["corpus"], "benchmark": ["benchmark_export"]}  # fmt: skip
    assert [s.alias for s in selected_stages(["signals"], packages)] == [
        "signal-inputs", "shards", "thresholds"
    ]  # fmt: skip
    assert [s.alias for s in selected_stages(["corpus", "benchmark"], packages)] == [
        "sources", "benchmark"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="the packages: benchmark, corpus, signals"):
        selected_stages(["corpora"], packages)
    runs = next(s for s in STAGES if s.job == "build_runs")
    keep = partition_filter(runs, ["Algebra"], {"bm25"})
    assert keep("Algebra|bm25") and not keep("Geometry|bm25") and not keep("Algebra|gone")


def test_a_first_partition_of_a_parent_that_had_none_makes_its_child_unsynced():
    """Dagster records no cursor for a partitioned parent none of whose partitions existed when
    the child ran, and then never calls the child stale (checked: its resolver says FRESH);
    `why_run` does, naming the partition, and says nothing once the child ran again."""
    import dagster as dg
    from dagster._core.definitions.data_version import StaleStatus

    from saber_assets.orchestration.plan import stale_resolver, why_run

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


def job_name_literals(root: Path) -> list[str]:
    """Every string literal naming a job (or its ``build_`` prefix) outside the stage table:
    what a module needs of a stage is a field of ``stages.Stage``, as a retriever's kind is its
    module's, never a name compared by heart (tests/test_retrievers.py)."""
    import ast

    from saber_assets.orchestration.observe import OBSERVE_JOBS

    jobs = {s.job for s in STAGES} | {"build_"} | {j.name for j in OBSERVE_JOBS}
    aliases = {s.alias for s in STAGES}
    owners = {("saber_assets", "stages.py"), ("orchestration", "observe.py")}
    found = []
    for path in sorted([*(root / "saber_assets").rglob("*.py"), *(root / "perf").rglob("*.py")]):
        if (path.parent.name, path.name) in owners:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in jobs:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
            # a stage told by its alias (`stage.alias == "analyses"`): a field of Stage says it
            if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Attribute) and side.attr == "alias"
                for side in (node.left, *node.comparators)
            ):
                for side in (node.left, *node.comparators):
                    if isinstance(side, ast.Constant) and side.value in aliases:
                        found.append(f"{path.relative_to(root)}:{node.lineno}: {side.value!r}")
    return found


def test_no_module_names_a_job_but_the_stage_table(tmp_path):
    assert job_name_literals(REPO_ROOT) == []
    copy_source(tmp_path)  # a planted comparison is found
    target = tmp_path / "saber_assets" / "pods.py"
    target.write_text(
        target.read_text() + '\n\ndef planted(job):\n    return job == "build_runs"\n'
    )
    assert [x.split(": ")[1] for x in job_name_literals(tmp_path)] == ["'build_runs'"]
    # an observe job by name, and a stage told by its alias, are found too
    target.write_text(
        target.read_text() + '\n\ndef planted2(stage):\n    return stage.alias == "analyses"'
        ' or stage.job == "observe_inputs"\n'
    )
    assert sorted(x.split(": ")[1] for x in job_name_literals(tmp_path)) == [
        "'analyses'",
        "'build_runs'",
        "'observe_inputs'",
    ]


def test_an_assets_group_is_the_package_that_declares_it():
    """The UI's groups are the packages a newcomer finds the code in (set once, by the
    declaration helpers, never by hand)."""
    graph = make_definitions(DEFAULT_CONFIG).resolve_asset_graph()
    modules = asset_modules()
    for key in graph.get_all_asset_keys():
        name = key.to_user_string()
        if name in modules:
            assert graph.get(key).group_name == modules[name].split(".")[1], name
    groups = {graph.get(k).group_name for k in graph.get_all_asset_keys()}
    packages = {p.name for p in (REPO_ROOT / "saber_assets").iterdir() if any(p.glob("*assets.py"))}
    assert groups <= packages, groups - packages


def test_every_name_in_the_readmes_package_table_is_a_selection():
    """What a newcomer reads in the README's table they can pass to `saber build --select`."""
    import re

    from saber_assets.orchestration.launch import package_assets
    from saber_assets.orchestration.plan import selected_stages

    packages = package_assets(make_definitions(DEFAULT_CONFIG))
    readme = (REPO_ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z]+)` \| ((?:`[a-z-]+`(?:, )?)+) \|", readme, re.M)
    assert {package for package, _ in rows} == set(packages)
    for package, jobs in rows:
        aliases = re.findall(r"`([a-z-]+)`", jobs)
        assert {s.alias for s in selected_stages(aliases)} == set(aliases)
        if package not in aliases:  # a name that is both selects the job
            assert {s.alias for s in selected_stages([package], packages)} == set(aliases), package


# a board column spelled out to read or write one: `row[f"{d} ci"]`, `.get(f"{d} queries")`,
# `r[`${d} ci`]`, `d + " ci"`, `f"{d} ci" in board.columns`, `endswith(" ci")` (the names are
# made in leaderboard/board.py and read back through it, in Python and in the pages)
SPELLED_COLUMN = re.compile(
    r"""[\[(]\s*f?["'`]\$?\{[^{}\n]+\} (?:ci|queries)["'`]"""
    r"""|\+\s*["'] (?:ci|queries)["']"""
    r"""|\} (?:ci|queries)["']\s+(?:not\s+)?in\b"""
    r"""|endswith\(\s*["'] (?:ci|queries)["']"""
)


def spelled_board_columns(root: Path) -> list[str]:
    """``path:line`` of every board column name spelled outside the module that owns them."""
    owner = root / "saber_assets" / "leaderboard" / "board.py"
    found = []
    for path in sorted((root / "saber_assets").rglob("*")):
        if path.suffix not in (".py", ".js") or path == owner or "vendor" in path.parts:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if SPELLED_COLUMN.search(line):
                found.append(f"{path.relative_to(root)}:{n}")
    return found


# the board's fixed names (its interval columns, its files, board.json's own keys): a string
# that is exactly one of them, outside leaderboard/board.py, spells what the Board owns
OWNED_NAMES = {"ci_low", "ci_high", "ci_low_joint", "ci_high_joint", "ci_low_clean",
               "ci_high_clean", "leaderboard.parquet", "leaderboard.csv", "significance.parquet",
               "significance.csv", "board.json", "rounds_resolution.parquet", "leaderboard.md",
               "full_corpus_board.parquet", "full_corpus_fill.parquet", "full_corpus.json",
               "bootstrap_resamples", "test_resamples", "excluded_queries", "off_board"}  # fmt: skip
OWNED_IN_SCRIPT = re.compile(r"\bci_(?:low|high)(?:_joint|_clean)?\b")


def owned_names_spelled(root: Path) -> list[str]:
    """``path:line`` of every string constant (docstrings aside) that is one of the board's own
    names, and of each interval column a page's script names, outside the board's module."""
    import ast

    owner = root / "saber_assets" / "leaderboard" / "board.py"
    found = []
    for path in sorted((root / "saber_assets").rglob("*")):
        if path == owner or "vendor" in path.parts:
            continue
        if path.suffix == ".js":
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if OWNED_IN_SCRIPT.search(line):
                    found.append(f"{path.relative_to(root)}:{n}")
        elif path.suffix == ".py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = {id(node.body[0].value) for node in ast.walk(tree)
                    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                    and node.body and isinstance(node.body[0], ast.Expr)}  # fmt: skip
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and node.value in OWNED_NAMES
                        and id(node) not in docs):  # fmt: skip
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_board_column_is_spelled_outside_the_module_that_owns_them(tmp_path):
    assert spelled_board_columns(REPO_ROOT) == []
    assert owned_names_spelled(REPO_ROOT) == []
    # planted, in a report module and in a page's script: both named
    root = copy_source(tmp_path)
    report = root / "saber_assets" / "site" / "report_assets.py"
    report.write_text(report.read_text() + '\nNAME = ROW[f"{DOMAIN} ci"]\n')
    page = root / "saber_assets" / "site" / "explorer_static" / "explorer.js"
    page.write_text(page.read_text() + "\nconst n = r[`${d} queries`];\n")
    assert [p.split(":")[0] for p in spelled_board_columns(root)] == [
        "saber_assets/site/explorer_static/explorer.js",
        "saber_assets/site/report_assets.py",
    ]
    # a fixed column, a board file and a key of board.json, each spelled out: each named
    verify = root / "saber_assets" / "leaderboard" / "verify.py"
    verify.write_text(verify.read_text() + '\nLOW = ROW["ci_low"]\n')
    cli = root / "saber_assets" / "cli" / "cost.py"
    cli.write_text(cli.read_text() + '\nPATH = "board.json"\nKEY = {"off_board": []}\n')
    page.write_text(page.read_text() + "\nconst lo = r.ci_low_joint;\n")
    assert sorted(p.split(":")[0] for p in owned_names_spelled(root)) == [
        "saber_assets/cli/cost.py", "saber_assets/cli/cost.py",
        "saber_assets/leaderboard/verify.py", "saber_assets/site/explorer_static/explorer.js",
    ]  # fmt: skip


def test_no_source_package_is_named_like_build_output():
    """Code-structure tools skip folders named like build output (they skipped 1,064 lines of
    saber's orchestration when it was `build/`)."""
    from saber_assets.code_graph import PACKAGES, ROOT

    output_names = {"build", "dist", "out", "target"}
    named = [
        str(p.relative_to(ROOT))
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*")
        if p.is_dir() and p.name in output_names
    ]
    assert named == []


def test_an_asset_that_does_not_say_what_config_it_reads_is_refused():
    """Its code version would miss a change of the config it depends on: the definitions stop."""
    from saber_assets.definitions import stage_declarations
    from saber_assets.lib.declare import table_asset

    @table_asset()
    def forgetful():
        return None

    with pytest.raises(ValueError, match=r"do not say which config sections they read.*forgetful"):
        asset_reads([*stage_declarations(), forgetful])
    reads = asset_reads()
    assert reads["tournament_judgments"] == ("seed", "tournament", "llm", "prompts")
    assert reads["corpus_quarantine"] == reads["corpus"] == ("seed", "corpus")


# the Numba kernels are one loop each, written for the compiler (signals/kernels.py)
LONG_ALLOWED = {("saber_assets/signals/kernels.py", "_block")}


def long_functions(root: Path, most: int = 100) -> list[str]:
    """``path:name (lines)`` of every function longer than ``most`` lines."""
    import ast

    found = []
    for pkg in ("saber_assets", "saber_resources"):
        for path in sorted((root / pkg).rglob("*.py")):
            rel = str(path.relative_to(root))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > most and (rel, node.name) not in LONG_ALLOWED:
                        found.append(f"{rel}:{node.name} ({lines} lines)")
    return found


def test_no_function_runs_past_a_hundred_lines(tmp_path):
    """A long function is split into named steps (the Numba kernels aside); one planted is named."""
    assert long_functions(REPO_ROOT) == []
    root = copy_source(tmp_path)
    planted = root / "saber_assets" / "cost.py"
    body = "".join(f"    x{n} = {n}\n" for n in range(101))
    planted.write_text(planted.read_text() + f"\n\ndef planted():\n{body}")
    assert long_functions(root) == ["saber_assets/cost.py:planted (102 lines)"]
