"""Faults are routine: every fault of `saber_resources.fault_proxy` between saber's OpenAI
transport and a server, met and retried into the right answer, counted by cause; and a run of
judgments through the proxy at a 10% fault rate that comes out identical to a clean run, asking
the server nothing twice beyond the answers the faults lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import numpy as np
import polars as pl
import pytest
import yaml

from saber_assets.config import REPO_ROOT
from saber_resources.fault_proxy import FAULTS, REACH_UPSTREAM, FaultProxy
from saber_resources.llm import OpenAIBackend
from saber_resources.llm_tasks import LLMPairJudge, LLMSummarizer, TaskRunner

from .conftest import tiny_doc, write_tiny_inputs
from .fake_openai import FakeOpenAI, varied_answer

# the client's cause for each fault (TransportStats.retries); a slow stream is no fault to it
CAUSE = {
    "reset_before_read": "connection",
    "reset_after_read": "connection",
    "http_500": "http_500",
    "http_503": "http_503",
    "http_429": "http_429",
    "stall": "timeout",
    "truncated_body": "connection",
    "html_200": "malformed_body",
    "wrong_shape_200": "malformed_body",
}


def _backend(url: str, **kw) -> OpenAIBackend:
    # a timeout that a loaded 2-core box (the suite runs beside) does not hit by accident
    kw = {"timeout_s": 3.0, "backoff_s": 0.01, "max_retries": 3, **kw}
    return OpenAIBackend(base_url=url + "/v1", model="m", server="openai", **kw)


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_retried_into_the_right_answer_and_counted(fault):
    with FakeOpenAI() as srv:
        upstream = srv.url.rsplit("/v1", 1)[0]
        with FaultProxy(upstream, rate=1.0, mix={fault: 1}, max_per_request=1, stall_s=4.0,
                        retry_after_s=1) as proxy:  # fmt: skip
            backend = _backend(proxy.url)
            t0 = time.monotonic()
            idea = LLMSummarizer(TaskRunner(backend)).summarize("Problem: p", "Solution: s")
            waited = time.monotonic() - t0
        reached = len(srv.requests)
    assert idea == "Apply the pigeonhole principle to the residues."
    assert proxy.counts() == {fault: 1, "forwarded": 1} or (
        fault == "slow_stream" and proxy.counts() == {"slow_stream": 1}
    )
    if fault == "slow_stream":  # slow, whole and correct: the client waits, nothing is retried
        assert not backend.transport.retries and reached == 1
        return
    assert backend.transport.retries == {CAUSE[fault]: 1}
    # the server saw the request twice only where the fault lost an answer it had given
    assert reached == (2 if fault in REACH_UPSTREAM else 1)
    if fault == "http_429":
        assert waited >= 1.0  # Retry-After: 1 was honoured, not the 10 ms backoff


def test_a_run_through_ten_percent_faults_equals_a_clean_run_and_asks_nothing_twice():
    """120 judge requests through the proxy at a 10% rate, every fault in the mix: the same
    answers as a clean run; the server answered the clean run's requests plus exactly the ones
    whose answers a fault lost; the transport's retries by cause match the proxy's log."""
    items = [(f"query {i}", f"candidate {i}a", f"candidate {i}b") for i in range(120)]
    with FakeOpenAI() as srv:
        clean = LLMPairJudge(TaskRunner(_backend(srv.url.rsplit("/v1", 1)[0])), "direct")
        want = [o.value for o in clean.compare_batch(items)]
        clean_requests = len(srv.requests)
        srv.requests.clear()
        with FaultProxy(srv.url.rsplit("/v1", 1)[0], rate=0.1, seed=3, stall_s=4.0,
                        retry_after_s=0) as proxy:  # fmt: skip
            backend = _backend(proxy.url, max_retries=6, max_concurrency=16)
            got = [o.value for o in LLMPairJudge(TaskRunner(backend), "direct").compare_batch(items)]
        faulted = len(srv.requests)
    counts = proxy.counts()
    faults = {k: v for k, v in counts.items() if k != "forwarded"}
    assert got == want and all(o is not None for o in got)
    assert sum(faults.values()) >= 6 and len(faults) >= 4  # a real mix at this rate and seed
    lost = sum(counts.get(f, 0) for f in ("reset_after_read", "truncated_body"))
    slow = counts.get("slow_stream", 0)
    retried = dict(backend.transport.retries)
    # a forwarded answer the client gave up waiting for (a loaded machine): asked again, counted
    abandoned = retried.get("timeout", 0) - counts.get("stall", 0)
    assert counts["forwarded"] + slow == clean_requests + abandoned
    assert faulted == clean_requests + lost + abandoned
    expected: dict[str, int] = {"timeout": abandoned} if abandoned else {}
    for fault, n in faults.items():
        if fault != "slow_stream":
            expected[CAUSE[fault]] = expected.get(CAUSE[fault], 0) + n
    assert retried == expected


def test_a_fault_mix_is_checked_and_the_draw_is_seeded():
    with pytest.raises(ValueError, match="unknown faults"):
        FaultProxy("http://x", mix={"meteor": 1})
    with pytest.raises(ValueError, match="not in"):
        FaultProxy("http://x", rate=1.5)
    a, b = FaultProxy("http://x", rate=0.3, seed=5), FaultProxy("http://x", rate=0.3, seed=5)
    bodies = [f"body {i}".encode() for i in range(200)]
    draws = [a.draw(x) for x in bodies]
    assert draws == [b.draw(x) for x in reversed(bodies)][::-1]  # order does not matter
    assert 30 <= sum(d is not None for d in draws) <= 90
    assert [a.draw(x) for x in bodies] != draws  # a retried request draws again


def _build(cfg, home, env_extra=None) -> subprocess.Popen:
    env = {**os.environ, "SABER_HOME": str(home), **(env_extra or {})}
    env.pop("DAGSTER_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "saber_assets.cli", "build", "--config", str(cfg), *STAGES],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


# every stage that asks the LLM or reads what it answered, through the leaderboard
STAGES = [a for s in ("sources", "annotations", "signal-inputs", "shards", "thresholds",
                      "domains", "benchmark", "indexes", "runs", "leaderboard")
          for a in ("--select", s)]  # fmt: skip


def _rehearsal_config(root, url: str):
    """The tiny config, smaller (130 problems), judged by an LLM at `url` with the direct judge."""
    doc = tiny_doc(root)
    doc["corpus"]["sources"][1]["sample_size"] = 100
    doc["llm"] = {"backend": "openai", "model": "fake", "base_url": url, "server": "openai",
                  "timeout_s": 3, "max_retries": 8}  # fmt: skip
    doc["tournament"].update(judge_prompt="direct", rounds=3, judge_chunk=16)
    path = root / "rehearsal.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _outcome(home) -> dict:
    out = home / "tiny"
    queries = pl.read_parquet(out / "benchmark" / "queries.parquet").sort("id")
    ratings = pl.read_parquet(out / "parquet" / "relevance_ratings")
    board = pl.read_csv(out / "leaderboard" / "leaderboard.csv")
    return {
        "queries": queries.select("id", "candidates", "relevance_scores").to_dicts(),
        "ratings": ratings.select("query_id", "candidate_id", "rating")
        .sort("query_id", "candidate_id").to_dicts(),
        "board": board.select("retriever", "setting", "ndcg@10").sort("retriever", "setting")
        .to_dicts(),
    }  # fmt: skip


@pytest.mark.e2e
def test_a_build_through_faults_and_kills_equals_a_clean_build(tmp_path):
    """The tiny config judged by an LLM (the fake, answering by content) built clean, then again
    through the fault proxy at 10% and killed with SIGKILL at seeded moments, resumed each time:
    the benchmark, the ratings and the leaderboard are the clean build's; no judgment is stored
    twice; no Dagster run is left STARTED and no `llm` pool slot held; the build printed the
    faults its runs met, by cause."""
    write_tiny_inputs(tmp_path)
    with FakeOpenAI(answer=varied_answer) as srv:
        cfg = _rehearsal_config(tmp_path, srv.url)
        clean = _build(cfg, tmp_path / "clean")
        out, _ = clean.communicate(timeout=900)
        assert clean.returncode == 0, out[-3000:]
        want = _outcome(tmp_path / "clean")
        assert want["queries"] and want["board"], "the rehearsal needs a benchmark to compare"
        upstream = srv.url.rsplit("/v1", 1)[0]
        with FaultProxy(upstream, rate=0.1, seed=11, stall_s=4.0, retry_after_s=0) as proxy:
            cfg = _rehearsal_config(tmp_path, proxy.url + "/v1")
            home = tmp_path / "faulted"
            rng = np.random.default_rng(5)
            kills, outputs = 0, []
            for _ in range(8):
                build = _build(cfg, home)
                if kills < 3:  # a seeded moment in this run, somewhere between two stages' work
                    try:
                        out, _ = build.communicate(timeout=float(rng.uniform(6, 30)))
                    except subprocess.TimeoutExpired:
                        os.killpg(build.pid, signal.SIGKILL)
                        build.wait()
                        kills += 1
                        continue
                else:
                    out, _ = build.communicate(timeout=900)
                outputs.append(out)
                if build.returncode == 0:
                    break
            assert build.returncode == 0, out[-3000:]
    assert kills >= 1, "the build ended before any kill point"
    assert _outcome(home) == want
    faults = {k: v for k, v in proxy.counts().items() if k != "forwarded"}
    assert sum(faults.values()) >= 10
    printed = " ".join(line for o in outputs for line in o.splitlines() if "faults met:" in line)
    assert printed, "no run said which faults it met"
    # every judgment once (the primary key), and as many as the clean build's
    with duckdb.connect(str(home / "tiny" / "stores.duckdb"), read_only=True) as con:
        n, distinct = con.execute(
            "SELECT count(*), count(DISTINCT (run_key, query, round, a, b)) FROM judgments"
        ).fetchone()
    with duckdb.connect(str(tmp_path / "clean" / "tiny" / "stores.duckdb"), read_only=True) as con:
        (n_clean,) = con.execute("SELECT count(*) FROM judgments").fetchone()
    assert n == distinct == n_clean
    _no_run_left_started(home / "dagster_home")


def _no_run_left_started(dagster_home) -> None:
    """No run of the killed builds is left STARTED (the next build marked it failed) and no
    `llm` pool slot is held or waited for."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
    from dagster._core.instance.ref import InstanceRef

    instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home)))
    started = instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    assert not started, [r.job_name for r in started]
    info = instance.event_log_storage.get_concurrency_info("llm")
    assert not info.claimed_slots and not info.pending_steps
