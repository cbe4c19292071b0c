"""The CPU stand-in judge: deterministic, symmetric, prefers shared technique over surface, and
never a contestant (no default retriever uses its model)."""

import json

import numpy as np
import pytest

from saber_assets.config import REPO_ROOT
from saber_assets.retrievers.registry import load_registry, models_of
from saber_resources.cpu_tasks import CPUPairJudge, CPUPointwiseJudge, techniques_of
from saber_resources.embeddings import CachedEmbedder
from saber_resources.prompts import problem_text
from saber_resources.task_set import cpu_embedder, make_tasks

TRIPLES = json.loads((REPO_ROOT / "tests" / "data" / "judge_triples.json").read_text())


def _judge() -> CPUPairJudge:
    return CPUPairJudge(CachedEmbedder(cpu_embedder(), None))


def _text(judge, pair) -> str:
    return judge.text_for(*pair)


def test_judge_is_deterministic_and_symmetric():
    judge = _judge()
    items = [
        (_text(judge, t["query"]), _text(judge, t["match"]), _text(judge, t["lookalike"]))
        for t in TRIPLES
    ]
    flipped = [(q, b, a) for q, a, b in items]
    first, again, swapped = (judge.compare_batch(x) for x in (items, items, flipped))
    assert [o.value for o in first] == [o.value for o in again]
    assert [o.p_first for o in first] == [o.p_first for o in again]
    for o, s in zip(first, swapped, strict=True):
        assert o.value == 3 - s.value  # the same candidate wins in either display order
        assert o.p_first == pytest.approx(1 - s.p_first, abs=1e-12)
        assert 0 <= o.p_first <= 1 and (o.p_first > 0.5) == (o.value == 1)
    # the text it judges holds problem and solution
    assert items[0][0] == problem_text(*TRIPLES[0]["query"])


def test_judge_prefers_the_shared_technique_to_the_surface_look_alike():
    judge = _judge()
    outcomes = judge.compare_batch(
        [
            (_text(judge, t["query"]), _text(judge, t["match"]), _text(judge, t["lookalike"]))
            for t in TRIPLES
        ]
    )
    rate = np.mean([o.value == 1 for o in outcomes])
    print(f"technique match preferred in {rate:.0%} of {len(TRIPLES)} hand-labelled triples")
    assert len(TRIPLES) >= 20 and rate >= 0.9


def test_pipeline_evidence_moves_the_judge():
    judge = _judge()
    q, a, b = (_text(judge, TRIPLES[0][k]) for k in ("query", "match", "lookalike"))
    judge.evidence[(q, b)] = (1.0, 1.0)  # the pipeline says b shares topics and core idea
    [o] = judge.compare_batch([(q, a, b)])
    assert o.value == 2
    p = CPUPointwiseJudge(CachedEmbedder(cpu_embedder(), None))
    p.scorer.evidence[(q, b)] = (1.0, 1.0)
    ya, yb = (x.value for x in p.p_yes_batch([(q, a), (q, b)]))
    assert 0 <= ya < yb <= 1


def test_techniques_are_read_from_text():
    assert techniques_of("By the pigeonhole principle and induction") == {
        "the pigeonhole principle",
        "induction",
    }


def test_no_default_retriever_is_built_on_the_judges_model():
    tasks = make_tasks(None, None, None)
    judge_models = {tasks.pair_judge.model, tasks.topic_scorer.model, tasks.pointwise_judge.model}
    entries = load_registry()
    used = {e.name: models_of(e, entries) for e in entries}
    assert any(used.values())  # dense retrievers are registered by default
    for name, models in used.items():
        assert not (models & judge_models), f"{name} uses the judge's model {models & judge_models}"
