"""The scale rehearsal: the synthetic annotation backend, the synthetic corpus, and
perf/scale.py end to end at N = 2,000 (CI's smoke test of the 283K rehearsal)."""

import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from saber_assets.annotations.traversal import traverse
from saber_assets.config import LLMConfig
from saber_resources.prompts import MAX_SUMMARY_WORDS, check_summary
from saber_resources.synthetic_tasks import (
    SyntheticSummarizer,
    SyntheticTopicScorer,
    synthetic_summary,
)
from saber_resources.task_set import make_tasks

REPO = Path(__file__).resolve().parent.parent


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "perf" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _scale_module():
    return _bench_module("scale")


def _tree(branching=(6, 8, 5)):
    """root -> 6 -> 8 -> 5 (leaves), titles unique."""
    children, labels = [[]], ["root"]
    frontier = [0]
    for depth, b in enumerate(branching):
        nxt = []
        for parent in frontier:
            for i in range(b):
                labels.append(f"t{depth}-{parent}-{i}")
                children.append([])
                children[parent].append(len(labels) - 1)
                nxt.append(len(labels) - 1)
        frontier = nxt
    return children, labels


def test_synthetic_topics_are_deterministic_skewed_and_realistically_shaped():
    children, labels = _tree()
    texts = [f"problem number {i} about something" for i in range(3000)]
    first, _ = traverse(texts, children, labels, SyntheticTopicScorer(), tau=0.85)
    again, _ = traverse(texts, children, labels, SyntheticTopicScorer(), tau=0.85)
    assert [r.topics for r in first] == [r.topics for r in again]
    counts = Counter(len(r.topics) for r in first)
    assert counts[0] == 0
    assert (counts[1] + counts[2] + counts[3] + counts[4]) / len(texts) >= 0.97
    assert counts[2] > 0.03 * len(texts)  # some problems have two topics
    # the traversal stops at inner nodes for some problems, reaches leaves for others
    leaves = {i for i, c in enumerate(children) if not c}
    at_leaf = sum(t in leaves for r in first for t in r.topics)
    total = sum(len(r.topics) for r in first)
    assert 0.2 < at_leaf / total < 0.9
    # skew: popular first-level branches hold far more than a uniform share, rare ones far
    # less, and every first-level branch is present
    branch = {}
    for top in children[0]:
        stack = [top]
        while stack:
            x = stack.pop()
            branch[x] = top
            stack += children[x]
    mass = Counter(branch[t] for r in first for t in r.topics)
    assert set(mass) == set(children[0])
    uniform = total / len(children[0])
    assert max(mass.values()) > 1.5 * uniform and min(mass.values()) < 0.5 * uniform


def test_synthetic_summaries_follow_the_summary_rules():
    texts = [f"problem {i}" for i in range(500)]
    out = SyntheticSummarizer().summarize_batch([(t, "solution") for t in texts])
    summaries = [o.value for o in out]
    assert all(o.ok for o in out)
    assert all(check_summary(s) == s for s in summaries)
    assert max(len(s.split()) for s in summaries) <= MAX_SUMMARY_WORDS
    assert summaries == [synthetic_summary(t) for t in texts]  # deterministic
    assert len(set(summaries)) > 300  # varied, yet built from a shared vocabulary


def test_synthetic_backend_is_labelled_and_judges_on_the_cpu():
    tasks = make_tasks(None, None, None, synthetic=True)
    assert tasks.backend == "synthetic"
    assert tasks.topic_scorer.backend == tasks.summarizer.backend == "synthetic"
    assert tasks.pair_judge.backend == "cpu"
    assert LLMConfig(backend="synthetic").judge_backend == "cpu"
    assert LLMConfig(backend="openai").judge_backend == "openai"
    assert make_tasks(None, None, None).topic_scorer.backend == "cpu"


def test_synthetic_corpus_has_unique_ids_formulas_and_planted_near_duplicates():
    scale = _scale_module()
    c = scale.synthetic_corpus(800, seed=3, near_dup=0.1)
    assert c == scale.synthetic_corpus(800, seed=3, near_dup=0.1)
    assert len(set(c["id"])) == 800
    assert all("$" in p for p in c["problem"])
    seen: dict[str, list[int]] = {}
    dups = 0
    for i, p in enumerate(c["problem"]):
        if p in seen:  # a copy of an earlier problem (maybe itself a copy): one word changed
            dups += 1
            a = c["solution"][i].split(" ")
            diffs = [
                sum(x != y for x, y in zip(a, c["solution"][j].split(" "), strict=True))
                for j in seen[p]
            ]
            assert min(diffs) <= 1
        seen.setdefault(p, []).append(i)
    assert 40 <= dups <= 120


def test_growth_exponents_are_fitted_per_stage():
    scale = _scale_module()
    results = {
        str(n): {
            "stages": [
                {"stage": s, "seconds": (n / 1000) ** (2 if s == "shards" else 1)}
                for s in scale.STAGES
            ]
        }
        for n in (1000, 4000, 16000)
    }
    exp = scale.exponents(results)
    assert exp["shards"] == pytest.approx(2.0)
    assert exp["sources"] == pytest.approx(1.0)


@pytest.mark.e2e
def test_scale_rehearsal_smoke_at_1000_problems(tmp_path):
    """The rehearsal end to end through Dagster: every stage ran, the near-duplicates were
    folded, the annotations are labelled synthetic, the leaderboard has both retrievers."""
    scale = _scale_module()
    home, out = tmp_path / "home", tmp_path / "out"
    scale.main(
        ["--n", "1000", "--queries-per-domain", "2", "--candidates-per-group", "10",
         "--home", str(home), "--out", str(out), "--one-process",
         "--retriever", "bm25", "--retriever", "jaccard-no-tok"]
    )  # fmt: skip
    res = json.loads((out / "scale.json").read_text())["1000"]
    assert [s["stage"] for s in res["stages"]] == scale.STAGES
    assert all(s["seconds"] > 0 for s in res["stages"])
    assert "| domains |" in (out / "scale.md").read_text()
    parquet = home / "scale-1000" / "parquet"
    corpus = pl.read_parquet(parquet / "corpus.parquet")
    dups = pl.read_parquet(parquet / "corpus_duplicates.parquet")
    assert 10 <= dups.height <= 60 and corpus.height == 1000 - dups.height
    ann = pl.read_parquet(parquet / "problem_annotations.parquet")
    assert ann.height == corpus.height and (ann["topics"].list.len() > 0).all()
    board = pl.read_parquet(home / "scale-1000" / "leaderboard" / "leaderboard.parquet")
    assert set(board["retriever"]) == {"bm25", "jaccard-no-tok"}
    assert np.isfinite(board["ndcg@10"].to_numpy()).all()
    assert (
        (home / "scale-1000" / "leaderboard" / "leaderboard.md")
        .read_text()
        .startswith("Judge backend: cpu")
    )
    # a stopped rehearsal goes on from a stage: the earlier stages' figures are kept, the rest
    # measured again (each its own process); without saved figures it refuses to start
    scale.main(
        ["--n", "1000", "--queries-per-domain", "2", "--candidates-per-group", "10",
         "--home", str(home), "--out", str(out), "--resume-from", "leaderboard",
         "--retriever", "bm25", "--retriever", "jaccard-no-tok"]
    )  # fmt: skip
    again = json.loads((out / "scale.json").read_text())["1000"]
    assert again["stages"][:-1] == res["stages"][:-1]
    assert again["stages"][-1]["stage"] == "leaderboard" and again["stages"][-1]["wall"] > 0
    # then each heavy stage's engine alone, beside saber's own seconds read from the build log
    engines = again["engines"]
    assert engines["shards"]["sample_rows"] > 0 and engines["shards"]["row_pairs_per_s"] > 0
    assert set(engines["retrievers"]) == {"bm25", "jaccard-no-tok"}
    for r in engines["retrievers"].values():
        assert min(r["indexes_saber"], r["runs_saber"], r["indexes_engine"]) > 0
    assert "| shards (kernel over every full row) |" in (out / "scale.md").read_text()
    with pytest.raises(SystemExit, match="no saved figures"):
        scale.main(["--n", "3000", "--home", str(home), "--out", str(out),
                    "--resume-from", "indexes"])  # fmt: skip


def test_build_steps_seconds_are_read_per_partition_from_the_log():
    engines = _bench_module("engines")
    log = """
=== indexes
  retriever_index [bm25]                 rows=None
  (build_indexes ok in 12.5s, process peak RSS 1.00 GB)
  retriever_index [jaccard]
  (build_indexes ok in 2.0s, process peak RSS 1.00 GB)
=== runs
  retriever_runs [Algebra|bm25]          rows=None
  (build_runs ok in 3.0s, process peak RSS 1.00 GB)
  retriever_runs [Geometry|bm25]
  (build_runs ok in 4.5s, process peak RSS 1.00 GB)
  retriever_runs [Algebra|jaccard]       rows=None
  (build_runs FAILED in 1.0s, process peak RSS 1.00 GB)
"""
    got = engines.saber_seconds(log, ["bm25", "jaccard", "tfidf"])
    assert got == {
        "bm25": {"indexes": 12.5, "runs": 7.5},
        "jaccard": {"indexes": 2.0, "runs": 1.0},
        "tfidf": {"indexes": 0.0, "runs": 0.0},
    }
