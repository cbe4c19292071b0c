"""A build rehearsed through faults: the tiny config judged by an LLM, built clean and then
through ``saber_resources.fault_proxy`` with SIGKILLs at seeded moments, each time resumed; what
the two builds made, compared. Used by ``tests/test_faults.py`` and ``perf/faults.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import yaml

from saber_assets.config import REPO_ROOT
from saber_testing.tiny import tiny_doc

# every stage that asks the LLM or reads what it answered, through the leaderboard
STAGES = [a for s in ("sources", "annotations", "signal-inputs", "shards", "thresholds",
                      "domains", "benchmark", "indexes", "runs", "leaderboard")
          for a in ("--select", s)]  # fmt: skip


def build_process(cfg: Path, home: Path) -> subprocess.Popen:
    """`saber build` of the rehearsal's stages in its own process group (to be killed whole)."""
    env = {**os.environ, "SABER_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "saber_assets.cli", "build", "--config", str(cfg), *STAGES],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip


def rehearsal_config(root: Path, url: str, problems: int = 100) -> Path:
    """The tiny config (its 30 problems and ``problems`` of MATH), one domain, judged by an LLM
    at ``url`` with the direct judge; its inputs written by ``tiny.write_tiny_inputs(root)``."""
    doc = tiny_doc(root)
    doc["corpus"]["sources"][1]["sample_size"] = problems
    doc["llm"] = {"backend": "openai", "model": "fake", "base_url": url, "server": "openai",
                  "timeout_s": 2, "backoff_s": 0.05, "max_retries": 8}  # fmt: skip
    doc["tournament"].update(judge_prompt="direct", rounds=3, judge_chunk=16)
    # one domain (the fake puts every problem under Algebra): a build of few steps
    doc["ontology"] = {"domains": {"Algebra": "Algebra"}}
    path = root / "rehearsal.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def outcome(home: Path) -> dict:
    """What a build made that a faulted build must make identically: the benchmark's queries,
    candidates and grades, the ratings, the leaderboard's scores."""
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


@dataclass
class Killed:
    """A build run to the end through at most ``kills`` SIGKILLs at seeded moments."""

    kills: int = 0
    moments: list[float] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    returncode: int | None = None


def build_with_kills(cfg: Path, home: Path, kills: int, seed: int,
                     window: tuple[float, float] = (6, 30)) -> Killed:  # fmt: skip
    """Build, killing the build's process group after a seeded moment in ``window`` seconds
    (until ``kills`` kills were made), then resuming, until it finishes."""
    rng = np.random.default_rng(seed)
    done = Killed()
    for _ in range(kills + 5):
        build = build_process(cfg, home)
        if done.kills < kills:
            moment = float(rng.uniform(*window))
            try:
                out, _ = build.communicate(timeout=moment)
            except subprocess.TimeoutExpired:
                os.killpg(build.pid, signal.SIGKILL)
                build.wait()
                done.kills += 1
                done.moments.append(round(moment, 1))
                continue
        else:
            out, _ = build.communicate(timeout=1800)
        done.outputs.append(out)
        done.returncode = build.returncode
        if build.returncode == 0:
            break
    return done


def judgments(home: Path) -> tuple[int, int]:
    """(stored judgments, distinct by their primary key)."""
    with duckdb.connect(str(home / "tiny" / "stores.duckdb"), read_only=True) as con:
        return con.execute(
            "SELECT count(*), count(DISTINCT (run_key, query, round, a, b)) FROM judgments"
        ).fetchone()


def no_run_left_started(dagster_home: Path) -> None:
    """No run of the killed builds is left STARTED (the next build marked it failed) and no
    `llm` pool slot is held or waited for."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter
    from dagster._core.instance.ref import InstanceRef

    instance = DagsterInstance.from_ref(InstanceRef.from_dir(str(dagster_home)))
    started = instance.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))
    assert not started, [r.job_name for r in started]
    info = instance.event_log_storage.get_concurrency_info("llm")
    assert not info.claimed_slots and not info.pending_steps
