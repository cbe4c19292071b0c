"""Every LLM task against a real OpenAI-compatible server: llama.cpp's ``llama-server`` running
SmolLM2-135M-Instruct on this CPU (fixtures ``llama_chat`` / ``llama_embed`` in conftest.py).

The model is tiny and answers badly. What must hold anyway: the server accepts every request
saber sends (no 4xx), constrained output (JSON schemas, fixed answers) comes back parseable
because saber sends the constraint in the form this server reads, P(yes) reads the server's own
log-probability format, embeddings and discovery work on its real routes, and an answer that does
not parse is data (error + raw text), never a crash.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import httpx
import numpy as np
import pytest

from saber_assets.config import DiscoveryEndpoint
from saber_assets.retrievers.discovery import discovered, tick
from saber_resources.cache import LLMCache
from saber_resources.embeddings import CachedEmbedder, make_embedder
from saber_resources.llm import LLMResource, OpenAIBackend
from saber_resources.llm_tasks import (
    LLMOrdinalJudge,
    LLMPairJudge,
    LLMPointwiseJudge,
    LLMSegmenter,
    LLMSummarizer,
    LLMTopicScorer,
    LLMTranslator,
    TaskRunner,
)
from saber_resources.prompts import pointwise_request
from saber_resources.stores import as_store
from saber_resources.warehouse import Warehouse

REPO = Path(__file__).resolve().parent.parent
LABELS = ["Algebra", "Geometry", "Number Theory", "Probability and Statistics"]


def _problems(n: int) -> list[tuple[str, str]]:
    """The first ``n`` bundled MATH problems with short solutions (quick to prefill)."""
    out = []
    with gzip.open(REPO / "data" / "corpora" / "math.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            if len(row["problem"]) + len(row["solution"]) < 600:
                out.append((row["problem"], row["solution"]))
            if len(out) == n:
                return out
    return out


def _backend(srv, **kw) -> OpenAIBackend:
    """The backend exactly as a config makes it (`llm.backend: openai`, `server: auto`)."""
    res = LLMResource(backend="openai", model=srv.alias, base_url=srv.url, max_retries=1, **kw)
    backend = res.make_backend()
    backend.backoff_s = 0.05
    return backend


def _runner(srv, tmp_path, **kw) -> TaskRunner:
    cache = LLMCache(Warehouse(path=str(tmp_path / "s.duckdb")).connect)
    return TaskRunner(_backend(srv, **kw), cache, max_retries=1)


def test_the_server_is_recognised_and_every_task_is_accepted(llama_chat, tmp_path):
    runner = _runner(llama_chat, tmp_path)
    probs = _problems(3)
    texts = [f"{p}\nSolution: {s}" for p, s in probs]
    q, a, b = texts
    results = {
        "topics": LLMTopicScorer(runner).score_batch([(t, LABELS) for t in texts]),
        # generated tokens are this test's time on 2 CPU cores: each task's budget is the least
        # that shows its form (a cut-off answer is data as well)
        "summaries": LLMSummarizer(runner, max_tokens=96).summarize_batch(probs[:2]),
        "judge:direct": LLMPairJudge(runner, prompt="direct").compare_batch([(q, a, b), (q, b, a)]),
        "judge:paper": LLMPairJudge(runner, prompt="paper", max_tokens=48).compare_batch(
            [(q, a, b)]
        ),
        "ordinal": LLMOrdinalJudge(runner, max_tokens=48).score_batch([(q, a)]),
        "pointwise": LLMPointwiseJudge(runner).p_yes_batch([(q, a), (q, b)]),
        "math_split": LLMSegmenter(runner, max_tokens=64).segment_batch([probs[0][0]]),
        "translate": LLMTranslator(runner, max_tokens=64).translate_batch([(probs[0][0], "de")]),
    }
    assert runner.backend.server == "llama.cpp", runner.backend.server_probe
    for task, outcomes in results.items():
        for o in outcomes:  # a bad answer is data: the reason and the raw text are kept
            assert o.ok or (o.error and o.raw is not None), (task, o)
    # constrained output comes back in shape: JSON by its schema (llama.cpp's grammar does not
    # bound numbers, so a score of 4 is possible: the parser rejects it), a fixed answer by grammar
    for task in ("judge:direct", "pointwise"):
        assert all(o.ok for o in results[task]), (task, [o.error for o in results[task]])
    for o in results["topics"]:
        assert list(json.loads(o.raw)["scores"]) == LABELS, o.raw
    for o in results["summaries"]:  # JSON, or an answer the budget cut off (the model rambles)
        assert o.raw.lstrip().startswith("{"), o.raw
        assert (
            o.ok or "cut off" in o.error or {"has_core_idea", "core_idea"} <= set(json.loads(o.raw))
        ), (o.error, o.raw)
    assert {o.value for o in results["judge:direct"]} <= {1, 2}
    assert all(0.0 < o.value < 1.0 for o in results["pointwise"])
    # a one-token "Yes"/"No" ends at its budget ("length"): not a cut-off answer to retry
    assert all(o.attempts == 1 for o in results["pointwise"] + results["judge:direct"])
    st = runner.stats
    assert st.prompt_tokens > 1000 and st.completion_tokens > 20  # the server's own usage
    assert st.calls >= 13 and st.seconds > 0 and 1 <= st.max_in_flight <= 8


def test_a_fixed_answer_is_constrained_in_the_servers_own_form(llama_chat, tmp_path):
    """Without the grammar the tiny model rambles; with it, every direct judgment is a digit."""
    probs = _problems(4)
    texts = [f"{p}\nSolution: {s}" for p, s in probs]
    items = [(texts[0], texts[i], texts[j]) for i in (1, 2, 3) for j in (1, 2, 3) if i != j]
    generic = _runner(llama_chat, tmp_path, server="openai")  # sends no grammar
    loose = [r.text for r in generic.backend.generate(
        [LLMPairJudge(generic, prompt="direct").request(*it) for it in items]
    )]  # fmt: skip
    assert "grammar" not in generic.backend.body(
        LLMPairJudge(generic, prompt="direct").request(*items[0])
    )
    constrained = _runner(llama_chat, tmp_path)
    judge = LLMPairJudge(constrained, prompt="direct")
    outcomes = judge.compare_batch(items)
    assert constrained.backend.server == "llama.cpp"
    assert "grammar" in constrained.backend.body(judge.request(*items[0]))
    assert all(o.ok for o in outcomes)
    assert all(r.strip() in ("1", "2") for r in (o.raw for o in outcomes))
    # what the server does with no constraint: not always a bare digit (why the grammar matters)
    assert loose and not all(t.strip() in ("1", "2") for t in loose), loose


def test_p_yes_reads_the_real_servers_log_probabilities(llama_chat, tmp_path):
    """P(yes) from the first token's alternatives as llama.cpp gives them (before its grammar:
    other tokens are among them), renormalised over Yes / No."""
    runner = _runner(llama_chat, tmp_path)
    (q, _), (d, _) = _problems(2)
    judge = LLMPointwiseJudge(runner)
    [out] = judge.p_yes_batch([(q, d)])
    request = pointwise_request(q, d, template=judge.template)
    [answer] = runner.cache.get_many(
        "openai", llama_chat.alias, judge.version, [request.hash()]
    ).values()
    alts = answer.top_logprobs
    assert len(alts) == request.top_logprobs, alts
    assert all(isinstance(v, float) and v <= 0 for v in alts.values()), alts
    yes = max(v for t, v in alts.items() if t.strip().lower() == "yes")
    no = max(v for t, v in alts.items() if t.strip().lower() == "no")
    assert out.ok and out.value == pytest.approx(math.exp(yes) / (math.exp(yes) + math.exp(no)))
    assert answer.text in ("Yes", "No")  # the grammar held the answer itself


def test_an_answer_that_never_parses_is_recorded_not_raised(llama_chat, tmp_path):
    """A 4-token budget cuts the paper judge off: retried once with twice the budget, then a
    failure with its reason and raw text; the cache holds every attempt."""
    runner = _runner(llama_chat, tmp_path)
    (q, _), (a, _), (b, _) = _problems(3)
    [out] = LLMPairJudge(runner, prompt="paper", max_tokens=4).compare_batch([(q, a, b)])
    assert not out.ok and "cut off" in out.error and out.raw
    assert out.attempts == 2 and runner.stats.retries["cut_off"] == 1
    rows = runner.cache.db.frame("SELECT parsed_ok, parse_error FROM llm_cache")
    assert rows.height == 2 and not any(rows["parsed_ok"])


def test_a_prompt_over_the_servers_context_fails_alone(llama_chat, tmp_path):
    """llama.cpp refuses a prompt longer than a slot's context with HTTP 400: that item is a
    failure with the server's reason (not cached, not retried); the rest of the batch is
    answered and the batch does not raise."""
    runner = _runner(llama_chat, tmp_path)
    (p, s), *_ = _problems(1)
    huge = "Let $a_1 = 1$ and $a_{n+1} = a_n^2 + 1$. " * 400  # ~8,000 tokens > 4,096 per slot
    judge = LLMPairJudge(runner, prompt="direct")
    outs = judge.compare_batch([(p, s, p), (huge, p, s)])
    assert outs[0].ok
    assert not outs[1].ok and "exceed" in outs[1].error and "HTTP 400" in outs[1].error
    assert outs[1].attempts == 1 and runner.stats.refused == 1
    assert runner.cache.db.frame("SELECT count(*) AS n FROM llm_cache")["n"][0] == 1


def test_embeddings_over_the_real_route_for_the_dense_retriever(llama_embed, tmp_path):
    emb = make_embedder("openai", model=llama_embed.alias, base_url=llama_embed.url)
    texts = [p for p, _ in _problems(5)]
    cached = CachedEmbedder(emb, None)
    vecs = cached.encode(texts)
    assert vecs.shape == (5, 576)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    again = make_embedder("openai", model=llama_embed.alias, base_url=llama_embed.url)
    assert np.allclose(again.encode(texts[:2]), vecs[:2], atol=1e-4)  # deterministic
    sims = vecs @ vecs.T
    assert not np.allclose(sims, 1.0)  # different texts, different vectors


def test_the_chat_server_refuses_embeddings_and_discovery_says_so(
    llama_chat, llama_embed, tmp_path
):
    """A chat-only llama.cpp server answers /v1/embeddings with HTTP 501 (vLLM: 400); discovery
    records its model as chat-only, not the endpoint as down, and proposes the embedding
    server's model."""
    refused = httpx.post(llama_chat.url + "/embeddings", json={"model": "x", "input": ["a"]})
    assert refused.status_code == 501, refused.text
    db = as_store(Warehouse(path=str(tmp_path / "d.duckdb")).connect)
    endpoints = [
        DiscoveryEndpoint(name="chat", base_url=llama_chat.url, timeout_s=30),
        DiscoveryEndpoint(name="emb", base_url=llama_embed.url, timeout_s=30),
    ]
    done = tick(db, endpoints, set())
    rows = {r["endpoint"]: r for r in discovered(db).iter_rows(named=True)}
    assert done.skipped == {}, done.skipped
    assert rows["chat"]["model_id"] == llama_chat.alias and rows["chat"]["status"] == "chat"
    assert rows["emb"]["status"] == "proposed" and rows["emb"]["dimension"] == 576
    entry = json.loads(rows["emb"]["entry"])
    assert entry["params"]["embedder"]["base_url"] == llama_embed.url


def test_the_server_leaves_no_process_behind(llama_parts, tmp_path):
    from saber_resources.llama_server import LlamaServer

    srv = LlamaServer(*llama_parts, parallel=1, ctx=2048, log=tmp_path / "log")
    with srv:
        pid = srv.proc.pid
        assert httpx.get(srv.url + "/models").json()["data"][0]["id"] == srv.alias
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
    assert math.isfinite(srv.port)
