"""A benchmark built end to end by a real LLM server (llama.cpp + SmolLM2-135M on this CPU), killed
with SIGKILL in the middle of its tournament and resumed: the server's own log shows no judgment
asked twice, and the ratings equal those of an uninterrupted tournament on the same server.

The config is `configs/local-llm.yaml` (what a user runs) made smaller: 16 short problems, one
domain's tournament judged twice (killed + resumed, and uninterrupted in a second home).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import yaml

from saber_assets.settings import REPO_ROOT


def _saber(args: list[str], home: Path) -> subprocess.Popen:
    env = {**os.environ, "SABER_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "saber_assets.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _run(args: list[str], home: Path, timeout: float = 900) -> str:
    proc = _saber(args, home)
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    return out


def _config(tmp_path: Path, chat_url: str, embed_url: str) -> Path:
    doc = yaml.safe_load((REPO_ROOT / "configs" / "local-llm.yaml").read_text())
    doc["name"] = "real"
    doc["corpus"]["sources"][0]["sample_size"] = 16
    doc["llm"]["base_url"] = chat_url
    doc["tournament"]["judge_chunk"] = 2  # stored every two judgments: a kill loses little
    reg = yaml.safe_load((REPO_ROOT / "configs" / "local-llm.retrievers.yaml").read_text())
    for entry in reg["retrievers"]:
        if "embedder" in entry.get("params", {}):
            entry["params"]["embedder"]["base_url"] = embed_url
    (tmp_path / "retrievers.yaml").write_text(yaml.safe_dump(reg))
    doc["leaderboard"]["registry"] = str(tmp_path / "retrievers.yaml")
    doc["analyses"] = {"regime_pairs": 2, "regime_votes": 1}
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _judgments(store: Path) -> list[tuple]:
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(
            "SELECT query, round, a, b, winner FROM judgments ORDER BY ALL"
        ).fetchall()


def test_a_real_server_builds_a_benchmark_and_a_killed_tournament_resumes(
    llama_chat, llama_embed, tmp_path
):
    cfg = _config(tmp_path, llama_chat.url, llama_embed.url)
    home, clean_home = tmp_path / "home", tmp_path / "clean"
    upstream = ["sources", "annotations", "signal-inputs", "shards", "thresholds"]
    _run(["build", "--config", str(cfg), *sum((["--select", s] for s in upstream), [])], home)
    out = home / "real" / "parquet"
    topics = pl.read_parquet(out / "topic_annotations")
    assert topics.height == 16 and (topics["backend"] == "openai").all()
    assert topics["status"].is_in(["ok", "no_topics", "failed"]).all()
    # a failure is data: the reason and the model's raw answer are kept
    assert topics.filter(pl.col("status") == "failed")["error"].is_not_null().all()
    thresholds = pl.read_parquet(out / "relevance_thresholds.parquet")
    domain = thresholds.sort("viable_queries", descending=True)["domain"][0]

    # the tournament, killed once a few judgments are in
    domain_args = ["build", "--config", str(cfg), "--select", "domains", "--select", f"domain={domain}"]
    before = llama_chat.requests_served()
    first = _saber(domain_args, home)
    store = home / "real" / "stores.duckdb"
    deadline = time.monotonic() + 600
    while llama_chat.requests_served() - before < 6 and first.poll() is None:
        assert time.monotonic() < deadline, "the tournament asked nothing for 10 minutes"
        time.sleep(0.05)
    assert first.poll() is None, "the tournament ended before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    time.sleep(0.5)  # requests in flight when it died still finish on the server
    stored = _judgments(store)
    assert stored, "nothing was stored before the kill"

    after_kill = llama_chat.requests_served()
    _run(domain_args, home)
    asked_second = llama_chat.requests_served() - after_kill
    final = _judgments(store)
    assert set(stored) <= set(final)
    # the server's own count: the relaunch asked for exactly the judgments that were missing
    assert asked_second == len(final) - len(stored), (asked_second, len(final), len(stored))

    # the same tournament, uninterrupted, in a second home with empty stores
    (clean_home / "real").mkdir(parents=True)
    for name in ("parquet", "signals"):
        subprocess.run(["cp", "-r", str(home / "real" / name), str(clean_home / "real")], check=True)
    _run(domain_args + ["--force"], clean_home)
    resumed = pl.read_parquet(out / "relevance_ratings" / f"{domain}.parquet").sort("query_id", "candidate_id")
    clean = pl.read_parquet(
        clean_home / "real" / "parquet" / "relevance_ratings" / f"{domain}.parquet"
    ).sort("query_id", "candidate_id")
    assert resumed.select("query_id", "candidate_id", "rating").equals(
        clean.select("query_id", "candidate_id", "rating")
    )

    # the rest of the build on the same server: dense over /v1/embeddings, P(yes) re-ranking
    _run(["build", "--config", str(cfg)], home)
    board = pl.read_csv(home / "real" / "leaderboard" / "leaderboard.csv")
    assert {"bm25", "dense-smollm2", "ssemb-smollm2", "bm25-rerank"} <= set(board["retriever"])
    judged = pl.read_parquet(out / "tournament_judgments")
    assert judged["counts_as"].null_count() == 0
