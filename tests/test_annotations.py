"""Topic traversal, CPU tasks and the annotation assets (CPU and an OpenAI-compatible server)."""

import json

import numpy as np
import polars as pl
import pytest
from dagster import materialize

from saber_assets.annotations import assets as annotation_assets
from saber_assets.annotations.traversal import normalise_scores, request_labels, traverse
from saber_assets.io_managers import WarehouseParquetIOManager
from saber_assets.lib.partitions import annotation_partitions, chunk_of
from saber_assets.ontology import assets as ontology_assets
from saber_assets.pipeline import PipelineResource
from saber_resources.cpu_tasks import (
    CPUPairJudge,
    CPUSummarizer,
    CPUTopicScorer,
    humanize_title,
)
from saber_resources.embeddings import CachedEmbedder, average_windows, token_windows
from saber_resources.llm import LLMResource
from saber_resources.llm_tasks import Outcome
from saber_resources.stores import StoresResource
from saber_resources.task_set import cpu_embedder
from saber_resources.templates import builtin_template
from saber_resources.warehouse import Warehouse
from saber_testing.fake_openai import FakeOpenAI, chat_body, default_answer

# root(0) -> A(1) -> {A1(2), A2(3) -> {A2x(4)}}, B(5) -> {B1(6)}, C(7)
CHILDREN = [[1, 5, 7], [2, 3], [], [4], [], [6], [], []]
LABELS = ["Root", "A", "A1", "A2", "A2x", "B", "B1", "C"]


class ScriptedScorer:
    backend, model, version = "script", "script", "v0"

    def __init__(self, script):
        self.script = script  # (text, tuple(labels)) -> scores or None (failure)
        self.seen = []

    def score_batch(self, items):
        self.seen.append(list(items))
        out = []
        for text, labels in items:
            scores = self.script(text, tuple(labels))
            out.append(
                Outcome(scores)
                if scores is not None
                else Outcome(None, ok=False, error="bad", raw="???")
            )
        return out


def test_traversal_recursion_tau_competitor_and_pruning():
    def script(text, labels):
        table = {
            ("A", "B", "C"): {"A": 1.0, "B": 0.9, "C": 0.0},
            ("A1", "A2", "A"): {"A1": 0.86, "A2": 1.0, "A": 0.0},  # parent competes, is never kept
            ("A2x", "A2"): {"A2x": 0.2, "A2": 1.0},  # nothing kept under A2: A2 stays most specific
            ("B1", "B"): {"B1": 1.0, "B": 0.0},
        }
        return table[labels]

    scorer = ScriptedScorer(script)
    [res], levels = traverse(["p"], CHILDREN, LABELS, scorer, tau=0.85)
    assert res.kept == {1, 2, 3, 5, 6}
    assert res.topics == [2, 3, 6]  # A and B dropped: their children are kept
    assert res.calls == 4 and not res.failed
    # One batch per level; root request has no competitor, deeper ones end with the parent.
    assert [len(b) for b in scorer.seen] == [1, 2, 1]
    assert scorer.seen[0][0][1] == ["A", "B", "C"] and scorer.seen[1][0][1] == ["A1", "A2", "A"]
    assert [lv["requests"] for lv in levels] == [1, 2, 1]


def test_scores_are_normalised_before_tau_for_every_backend():
    """An LLM that never says 1.0: its best child (0.7) still passes tau = 0.85 after min-max."""

    def script(text, labels):
        table = {
            ("A", "B", "C"): {"A": 0.7, "B": 0.2, "C": 0.1},
            ("A1", "A2", "A"): {"A1": 0.6, "A2": 0.58, "A": 0.3},  # both near the best: both kept
            ("A2x", "A2"): {"A2x": 0.4, "A2": 0.4},  # no preference, positive: kept
        }
        return table[labels]

    [res], _ = traverse(["p"], CHILDREN, LABELS, ScriptedScorer(script), tau=0.85)
    assert res.kept == {1, 2, 3, 4} and res.topics == [2, 4]
    # all-zero scores: nothing is relevant, nothing kept
    [none], _ = traverse(
        ["p"], CHILDREN, LABELS, ScriptedScorer(lambda t, labels: dict.fromkeys(labels, 0.0)), 0.85
    )
    assert none.kept == set() and none.topics == []
    assert normalise_scores({"x": 0.2, "y": 0.7, "z": 0.45}) == pytest.approx(
        {"x": 0.0, "y": 1.0, "z": 0.5}
    )


def test_traversal_batches_levels_across_problems_and_records_failures():
    def script(text, labels):
        if text == "broken" and labels == ("A1", "A2", "A"):
            return None
        return {lab: (1.0 if i == 0 else 0.0) for i, lab in enumerate(labels)}

    scorer = ScriptedScorer(script)
    results, _ = traverse(["ok", "broken"], CHILDREN, LABELS, scorer, tau=0.85)
    assert results[0].topics == [2] and not results[0].failed
    # A's request failed: only A's branch is pruned, A stays as its most specific topic
    assert not results[1].failed and results[1].topics == [1] and results[1].raw == "???"
    assert results[1].pruned == [(1, "bad")]
    assert len(scorer.seen[0]) == 2  # both problems' root requests in one batch


def test_a_failed_request_prunes_its_branch_alone():
    """Two kept branches, one request failing: the other branch is annotated to its leaves;
    only a failed root request leaves a problem without topics."""

    def script(text, labels):
        if labels == ("A1", "A2", "A"):
            return None  # A's children never parse
        if text == "root fails" and labels == ("A", "B", "C"):
            return None
        return {lab: 1.0 if lab in ("A", "B", "B1") else 0.0 for lab in labels}

    results, levels = traverse(
        ["two", "root fails"], CHILDREN, LABELS, ScriptedScorer(script), 0.85
    )
    assert results[0].topics == [1, 6]  # A (pruned below), B's leaf B1
    assert results[0].pruned == [(1, "bad")] and not results[0].failed
    assert results[1].failed and results[1].topics == [] and results[1].pruned == []
    assert levels[1]["pruned"] == 1


def test_request_labels_are_unique():
    assert request_labels([1, 2], ["R", "X", "X"], 0) == ["X", "X (2)", "R"]
    assert request_labels([1], ["X", "X"], 0) == ["X", "X (general)"]


def test_humanize_title():
    assert humanize_title("CalculusandAnalysis") == "Calculus and Analysis"
    assert humanize_title("Point-SetTopology") == "Point-Set Topology"
    assert humanize_title("AlgebraicCurves") == "Algebraic Curves"
    # a word ending in a small word keeps it ("Divisi on Problems" was shown for three rows of
    # the composition); a glued one after a known word, or a rarely-final one, is split
    assert humanize_title("DivisionProblems") == "Division Problems"
    assert humanize_title("CoinTossing") == "Coin Tossing"
    assert humanize_title("vonNeumannAlgebra") == "von Neumann Algebra"
    assert humanize_title("LawoftheExcludedMiddle") == "Law of the Excluded Middle"
    assert humanize_title("CundyandRollettsEgg") == "Cundy and Rolletts Egg"
    assert humanize_title("MathematicsintheMedia") == "Mathematics in the Media"


def test_window_averaging_by_hand():
    assert token_windows(list(range(5)), 2) == [[0, 1], [2, 3], [4]]
    assert token_windows([], 4) == [[]]
    v = np.array([[1, 0], [0, 1], [3, 4]], dtype=np.float32)
    out = average_windows(v, np.array([0, 0, 1]), 2)
    assert np.allclose(out[0], [2**-0.5, 2**-0.5]) and np.allclose(out[1], [0.6, 0.8])


def test_cpu_tasks_deterministic_and_cached():
    wh = Warehouse(path=":memory:")
    from saber_resources.cache import EmbeddingCache

    base = cpu_embedder()
    emb = CachedEmbedder(base, EmbeddingCache(wh.connect))
    scorer = CPUTopicScorer(emb)
    labels = ["Geometry", "Number Theory", "Probability and Statistics"]
    a = scorer.score("How many primes divide 30030?", labels)
    calls = base.calls
    b = CPUTopicScorer(CachedEmbedder(base, EmbeddingCache(wh.connect))).score(
        "How many primes divide 30030?", labels
    )
    assert a == b and base.calls == calls  # second scorer served entirely from the DuckDB cache
    # raw (cosine + 1) / 2 in [0, 1]: the traversal, not the scorer, normalises per request
    assert max(a, key=a.get) == "Number Theory" and all(0 <= v <= 1 for v in a.values())
    assert normalise_scores(a)["Number Theory"] == 1.0
    judge = CPUPairJudge(emb)
    q, x, y = (
        "Count primes below 100.",
        "List all primes under 50.",
        "Find the area of a circle of radius 2.",
    )
    assert judge.compare(q, x, y) == 1 and judge.compare(q, y, x) == 2
    s = CPUSummarizer()
    sol = "By the pigeonhole principle two colours coincide. Then induction finishes the proof."
    assert (
        s.summarize("Prove it.", sol)
        == s.summarize("Prove it.", sol)
        == "Prove the result via the pigeonhole principle and induction."
    )
    assert s.summarize("p", "$(1, 2, 3)$") is None  # an answer alone: no reasoning


# ------------------------------------------------------------------ the assets, end to end


def _corpus(tmp_path, n=12) -> pl.DataFrame:
    rows = [
        {
            "id": f"t:{i}",
            "problem": f"Problem {i}: how many primes divide {i * 30 + 7}?",
            "solution": "Factor it.",
        }
        for i in range(n)
    ]
    rows[3]["problem"] = "GARBAGE please"
    return pl.DataFrame(rows)


def _resources(tmp_path, llm):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "name: t\ncorpus: {sources: [{name: math, bundled: math}]}\nannotations: {chunks: 2, max_parse_retries: 1}\n"
    )
    wh = Warehouse(path=str(tmp_path / "w.duckdb"))
    return {
        "pipeline": PipelineResource(config_file=str(cfg)),
        "warehouse": wh,
        "stores": StoresResource(path=str(tmp_path / "stores.duckdb")),
        "llm": llm,
        "parquet_io": WarehouseParquetIOManager(base_dir=str(tmp_path / "pq"), warehouse=wh),
    }


def test_annotation_assets_through_openai_server_record_failures(tmp_path):
    def answer(body):
        if "GARBAGE" in body["messages"][-1]["content"]:
            return 200, chat_body("definitely not json")
        return default_answer(body)

    corpus = _corpus(tmp_path)
    parts = annotation_partitions(2)
    chunked = [
        annotation_assets.topic_annotations.build({"annotation chunk": parts}),
        annotation_assets.solution_summaries.build({"annotation chunk": parts}),
    ]
    ontology_tree = ontology_assets.ontology_tree.build()
    topic_information_content = annotation_assets.topic_information_content.build()
    problem_annotations = annotation_assets.problem_annotations.build()
    from dagster import asset

    @asset(name="corpus", io_manager_key="parquet_io")
    def corpus_fixture() -> pl.DataFrame:
        return corpus

    with FakeOpenAI(answer=answer) as srv:
        llm = LLMResource(backend="openai", model="fake", base_url=srv.url, max_retries=0)
        res = _resources(tmp_path, llm)
        assert materialize([corpus_fixture, ontology_tree], resources=res).success
        for key in parts.get_partition_keys():
            assert materialize(
                [*chunked, corpus_fixture, ontology_tree],
                selection=chunked,
                partition_key=key,
                resources=res,
            ).success
        first_calls = len(srv.requests)
        result = materialize(
            [
                topic_information_content,
                problem_annotations,
                *chunked,
                corpus_fixture,
                ontology_tree,
            ],
            selection=[topic_information_content, problem_annotations],
            resources=res,
        )
        assert result.success
        # Re-materialising a chunk is served from the cache: no request reaches the server.
        key = chunk_of("t:3", 2)
        again = materialize(
            [*chunked, corpus_fixture, ontology_tree],
            selection=chunked,
            partition_key=key,
            resources=res,
        )
        assert again.success and len(srv.requests) == first_calls
        md = again.asset_materializations_for_node("topic_annotations")[0].metadata
        assert md["calls_made"].value == 0 and md["served_from_cache"].value > 0
    ann = pl.read_parquet(tmp_path / "pq" / "problem_annotations.parquet")
    assert ann.height == 12 and ann["id"].to_list() == corpus["id"].to_list()
    bad = ann.filter(pl.col("id") == "t:3").row(0, named=True)
    assert (
        bad["topic_status"] == "failed"
        and bad["topics"] == []
        and bad["summary_status"] == "failed"
    )
    good = ann.filter(pl.col("id") == "t:0").row(0, named=True)
    assert (
        good["topic_status"] == "ok"
        and good["summary"] == "Apply the pigeonhole principle to the residues."
    )
    topics = pl.read_parquet(tmp_path / "pq" / "topic_annotations" / f"{key}.parquet")
    failed = topics.filter(pl.col("id") == "t:3").row(0, named=True)
    assert failed["raw_answer"] == "definitely not json" and failed["error"].startswith("not JSON")
    version = f"topic-scores/v1+{builtin_template('topics').digest}"
    assert set(topics["backend"]) == {"openai"} and set(topics["prompt_version"]) == {version}
    summaries = pl.read_parquet(tmp_path / "pq" / "solution_summaries" / f"{key}.parquet")
    ok = summaries.filter(pl.col("status") == "ok").row(0, named=True)
    assert ok["has_core_idea"] is True and ok["keywords"] == ["pigeonhole", "residues"]
    assert ok["supporting_ideas"] == ["reduce modulo n"] and ok["confidence"] == 0.9
    ic = pl.read_parquet(tmp_path / "pq" / "topic_information_content.parquet")
    assert ic.filter(pl.col("node") == 0)["ic"].item() == 0.0 and ic["count"].sum() >= 11
    assert json.loads(json.dumps(md["prompt_version"].value)) == version
