"""A build killed with SIGKILL in the middle of a tournament, then relaunched: it finishes and
asks the judge nothing that was already stored."""

import os
import signal
import subprocess
import sys
import time

import duckdb
import yaml

from saber_assets.config import REPO_ROOT
from saber_assets.tournament.engine import swapped_key
from saber_testing.fake_openai import FakeOpenAI, default_answer


def _saber(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "saber_assets.cli", *args],
        cwd=REPO_ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _judgments(store) -> list[tuple]:
    """The LLM judge's, by their key (the shared build's CPU-judged tournament is not this
    test's): (run_key, query, round, a, b)."""
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(
            "SELECT run_key, query, round, a, b FROM judgments "
            "WHERE error IS NULL AND judge NOT LIKE 'cpu:%'"
        ).fetchall()


def judge_calls(srv) -> int:
    """The judgments asked of the server (its `GET /models`, asked once per run to learn how it
    takes constrained output, is not one)."""
    return sum(r["path"].endswith("/chat/completions") for r in srv.requests)


def _last_tournament_metadata(dagster_home) -> dict:
    from dagster import AssetKey, DagsterInstance

    with DagsterInstance.from_config(str(dagster_home)) as instance:
        records = instance.fetch_materializations(AssetKey("tournament_judgments"), limit=1)
        meta = records.records[0].asset_materialization.metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}


def test_tournament_killed_mid_run_resumes_without_asking_again(
    shared_build, tmp_path, monkeypatch
):
    """From a copy of the one-domain shared build, its tournament judged again by an LLM."""
    cfg = shared_build("algebra").copy_to(tmp_path, monkeypatch)

    def slow(body):  # a judge slow enough to be killed halfway
        time.sleep(0.15)
        return default_answer(body)

    with FakeOpenAI(answer=slow) as srv:
        doc = yaml.safe_load(cfg.read_text())
        doc["llm"] = {"backend": "openai", "model": "fake", "base_url": srv.url, "max_retries": 0}
        doc["tournament"].update(judge_prompt="direct", judge_chunk=2)
        cfg.write_text(yaml.safe_dump(doc))
        # the fake judge names the first-shown candidate every time: its check fails, accepted
        # here (the resume is the point; tests/test_build.py stops on it)
        args = ["build", "--config", str(cfg), "--select", "domains", "--select", "domain=Algebra",
                "--accept-failed-checks"]  # fmt: skip
        first = _saber(args)
        deadline = time.monotonic() + 600
        while judge_calls(srv) < 12 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, "the tournament ended before it could be killed"
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        asked_first = judge_calls(srv)
        store = tmp_path / "home" / "tiny" / "stores.duckdb"
        stored = _judgments(store)
        assert 0 < len(stored), "nothing was stored before the kill"

        second = _saber(args)
        out, _ = second.communicate(timeout=900)
        assert second.returncode == 0, out[-3000:]
        assert "of a killed build marked failed" in out  # its pool slot freed, or it would hang
        assert "currently in beta" not in out and "currently in preview" not in out
        asked_second = judge_calls(srv) - asked_first

    meta = _last_tournament_metadata(tmp_path / "home" / "dagster_home")
    assert meta["judgments_replayed"] == len(stored)  # the store, not only the LLM cache
    assert meta["judgments_requested"] + len(stored) == meta["dagster/row_count"]
    final = _judgments(store)
    # the pairs the tournament stands on, once each (a share is judged again in the other
    # order, under its own key, and only reported)
    swapped = {swapped_key(row[0]) for row in final}
    played = [row[1:] for row in final if row[0] not in swapped]
    assert len(played) == len(set(played)), "a judgment was stored twice"
    assert set(stored) <= set(final)
    assert len(final) > len(stored), "the relaunch judged nothing new"
    # every stored judgment was replayed, not asked again
    assert asked_second <= len(final) - len(stored), (asked_second, len(final), len(stored))
