"""What moves an asset's version and what does not: the config sections it reads, the source
its module runs (read from the import graph, so an edit to any module it imports counts and an
edit to a module only the CLI imports does not), its parents' versions; never where its inputs lie
or how fast it runs. The registry's entries and the input files are data versions."""

import json
import shutil
from pathlib import Path

import pytest

from saber_assets.code_graph import CodeGraph
from saber_assets.config import REPO_ROOT, load_config
from saber_assets.versions import asset_code_versions, registry_versions

from .conftest import copy_source


def test_a_registry_entry_moves_its_own_partitions_and_its_fusions_only():
    registry = {
        "bm25": {"name": "bm25", "kind": "bm25", "params": {}},
        "dense": {"name": "dense", "kind": "dense", "params": {}},
        "rrf": {"name": "rrf", "kind": "fusion", "params": {"retrievers": ["bm25", "dense"]}},
    }
    base = registry_versions(registry)
    # a parameter of bm25 moves bm25's partitions and the fusion's that reads it, not dense's
    changed = dict(registry, bm25={**registry["bm25"], "params": {"k1": 1.2}})
    moved = {k for k, v in registry_versions(changed).items() if base[k] != v}
    assert moved == {"bm25", "rrf"}
    assert registry_versions({**registry, "tfidf": {"name": "tfidf", "kind": "tfidf"}}) == {
        **base,
        "tfidf": registry_versions({"tfidf": {"name": "tfidf", "kind": "tfidf"}})["tfidf"],
    }


def _code_versions(cfg, graph=None):
    from saber_assets.definitions import asset_modules, asset_reads, make_definitions

    assets = make_definitions().resolve_asset_graph()
    parents = {
        k.to_user_string(): [p.to_user_string() for p in assets.get(k).parent_keys]
        for k in assets.get_all_asset_keys()
    }
    return asset_code_versions(cfg, parents, asset_modules(), asset_reads(), graph)


def test_where_input_files_lie_moves_no_version_and_what_they_hold_does(tmp_path):
    """A moved checkout or a copied SABER_HOME is up to date: the config's input paths (corpus
    source, ontology nodes + edges, registry) are not part of a code version, and a file's data
    version is its content under its role, not its path."""
    from saber_assets.versions import input_versions

    data = REPO_ROOT / "tests" / "data"

    def config(where: Path, problem: str = "Find x."):
        where.mkdir()
        (where / "mine.jsonl").write_text(
            json.dumps({"id": 1, "problem": problem, "solution": "x"}) + "\n"
        )
        for name in ("msc_nodes.csv", "msc_edges.csv"):
            shutil.copyfile(data / name, where / name)
        (where / "retrievers.yaml").write_text("retrievers:\n  - {name: bm25, kind: bm25}\n")
        return load_config(None).model_validate({
            "name": "moved",
            "corpus": {"sources": [{"name": "mine", "path": str(where / "mine.jsonl"),
                                    "fields": {"id": "id", "problem": "problem", "solution": "solution"}}]},
            "ontology": {"nodes": str(where / "msc_nodes.csv"), "edges": str(where / "msc_edges.csv")},
            "retrievers": {"registry": str(where / "retrievers.yaml")},
        })  # fmt: skip

    here, there = config(tmp_path / "here"), config(tmp_path / "there")
    assert _code_versions(here) == _code_versions(there)
    assert input_versions(here) == input_versions(there)
    edited = config(tmp_path / "edited", problem="Find y.")
    assert _code_versions(edited) == _code_versions(here)  # content is data, not code
    moved = {k for k, v in input_versions(edited).items() if input_versions(here)[k] != v}
    assert moved == {"corpus_sources"}


def test_threads_and_memory_budgets_move_no_code_version_and_the_floors_do():
    cfg = load_config(None)

    def versions(**signals):
        return _code_versions(
            cfg.model_copy(update={"signals": cfg.signals.model_copy(update=signals)})
        )

    base = versions()
    assert versions(threads=7, gather_memory_gib=0.5) == base
    moved = {k for k, v in versions(floor_summary=0.3).items() if base[k] != v}
    assert {"pair_signal_shards", "pair_signal_index", "query_candidates", "leaderboard"} <= moved
    assert not moved & {"corpus", "ontology_tree", "topic_annotations", "problem_annotations"}


@pytest.mark.parametrize(
    "key, value, analysis",
    [
        ("mteb_scores", "scores.csv", "mteb_correlation"),
        ("regime_votes", 7, "judging_regimes"),
        ("published_benchmark", "pulled", "published_benchmark_recall"),
        ("convergence_queries", 9, "tournament_convergence"),
    ],
)
def test_one_analysiss_setting_moves_that_analysis_and_the_report_only(key, value, analysis):
    """Each analysis declares what it reads: a change to one analysis's settings re-versions it
    (and the report, which reads every section), never the others."""
    from saber_assets.stages import ANALYSES

    cfg = load_config(None)
    base = _code_versions(cfg)
    changed = cfg.model_copy(update={"analyses": cfg.analyses.model_copy(update={key: value})})
    moved = {k for k, v in _code_versions(changed).items() if base[k] != v}
    also = {"judge_human_agreement"} if key.startswith("regime_") else set()  # it scores them
    assert moved & set(ANALYSES) == {analysis, "benchmark_report", *also}


def test_more_tournament_rounds_move_the_tournament_and_everything_below_it_only():
    cfg = load_config(None)
    base = _code_versions(cfg)
    more = cfg.model_copy(update={"tournament": cfg.tournament.model_copy(update={"rounds": 9})})
    moved = {k for k, v in _code_versions(more).items() if base[k] != v}
    below = {
        "tournament_judgments", "relevance_ratings", "benchmark_export", "evaluation_benchmark",
        "retriever_index", "retriever_runs", "leaderboard", "benchmark_report",
    }  # fmt: skip
    assert below <= moved
    assert not moved & {
        "corpus", "ontology_tree", "topic_annotations", "solution_summaries",
        "problem_annotations", "pair_signal_shards", "relevance_thresholds", "query_candidates",
    }  # fmt: skip


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A copy of the project's source to edit."""
    return copy_source(tmp_path_factory.mktemp("checkout"))


def _edited(checkout: Path, module: str, edit: str = "\n# a reworded comment\n") -> CodeGraph:
    path = checkout / (module.replace(".", "/") + ".py")
    original = path.read_text()
    path.write_text(original + edit)
    try:
        graph = CodeGraph(checkout)
        assert graph.sources  # read now, before the file is put back
        return graph
    finally:
        path.write_text(original)


def _below(names: set[str]) -> set[str]:
    """The assets and every asset downstream of them (Dagster's asset graph, not the code's)."""
    from saber_assets.definitions import make_definitions

    graph = make_definitions().resolve_asset_graph()
    children: dict[str, set[str]] = {}
    for k in graph.get_all_asset_keys():
        for p in graph.get(k).parent_keys:
            children.setdefault(p.to_user_string(), set()).add(k.to_user_string())
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(children.get(n, ()))
    return out


CONTAMINATION = {"contamination", "own_candidate_matches"}
CORPUS = {"corpus", "corpus_quarantine", "corpus_duplicates"}  # one multi-asset
# what an edit to the board's code, or to contamination, must never move: a retriever's
# domain runs (hours of GPU at scale) and the exported benchmark
EXPENSIVE = {"benchmark_export", "evaluation_benchmark", "retriever_index", "retriever_runs"}


@pytest.mark.parametrize(
    ("module", "moves", "stays"),
    [
        # the module that declares the contamination assets
        ("saber_assets.contamination.assets", CONTAMINATION, EXPENSIVE),
        # a module they import, which the board's contamination columns import too
        (
            "saber_assets.contamination.matches",
            # and the published matches, whose dependents follow their data, not their code
            {*CONTAMINATION, "leaderboard", "published_benchmark_recall", "published_matches"},
            {*EXPENSIVE, "query_candidates"},
        ),  # fmt: skip
        # a module that module imports (transitively): the corpus reader moves the corpus too
        ("saber_assets.corpus.dedup", {*CORPUS, "contamination"}, set()),
        # the board's own module (its caveat reworded): the board, not the runs or the export
        ("saber_assets.leaderboard.assets", {"leaderboard"}, EXPENSIVE),
        # modules only the CLI runs: no asset
        ("saber_assets.leaderboard.paper", set(), None),
        # how outside runs are read: the verification reads the board's runs with it
        ("saber_assets.runs.outside", {"benchmark_verification"}, EXPENSIVE),
        # the run files' format: the runs stage writes them (and what reads the runs moves)
        ("saber_assets.runs.trec", {"retriever_runs"}, {"evaluation_benchmark"}),
        ("saber_assets.benchmark.formats", set(), None),
        ("saber_assets.cli.evaluate", set(), None),
    ],
)
def test_an_edited_module_moves_the_assets_that_run_it_and_no_other(checkout, module, moves, stays):
    cfg = load_config(None)
    base = _code_versions(cfg, CodeGraph(checkout))
    assert base == _code_versions(cfg), "a moved checkout hashes differently"
    moved = {k for k, v in _code_versions(cfg, _edited(checkout, module)).items() if base[k] != v}
    assert moves <= moved <= _below(moves), sorted(moved)
    if stays is None:
        assert not moved
    else:
        assert not moved & stays, sorted(moved & stays)


def test_the_import_graph_is_kept_by_content_and_never_read_stale(checkout):
    """Parsing every module costs each process start 0.4 s, so the imports are kept on disk by
    the sources' content: a second read finds the same graph without parsing, and an import
    added to a module is in the next graph read."""
    first = CodeGraph(checkout)
    assert first.imports and len(list((checkout / ".cache" / "code_graph").glob("*.json"))) == 1
    again = CodeGraph(checkout)
    again._imports_of = None  # a parse now would fail: the graph must come from the cache
    assert again.imports == first.imports
    module = "saber_assets.corpus.normalize"
    assert "saber_assets.cli.build" not in first.edges[module]
    edited = _edited(
        checkout, module, "\n\ndef planted():\n    from saber_assets.cli import build\n"
    )
    assert "saber_assets.cli.build" in edited.edges[module]
    assert CodeGraph(checkout).imports == first.imports  # the file is back: the first graph
