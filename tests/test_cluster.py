"""A local rehearsal of the cluster shape: Dagster on PostgreSQL (run and event storage), saber's
stores on PostgreSQL, `dagster dev` on 127.0.0.1 with 3 concurrent runs, driven by
`saber build --on`. Slow (minutes): it is the proof that several workers share one truth."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import psycopg
import pytest
import yaml

from saber_assets.config import REPO_ROOT
from saber_testing.rehearsal import STAGES
from saber_testing.tiny import write_tiny_inputs

from .conftest import shared_doc
from .dagster_dev import dagster_dev


def _create_db(dsn: str, name: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return dsn.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def deployment(postgres_dsn, make_config, tmp_path, monkeypatch):
    """`dagster dev` on Postgres storage with the shared one-domain config (`SHARED_BUILDS`),
    stopped by process group."""
    host_port = postgres_dsn.split("@", 1)[1].split("/", 1)[0]
    pg_port = int(host_port.split(":")[1])
    _create_db(postgres_dsn, "dagster_rehearsal")
    stores_dsn = _create_db(postgres_dsn, "saber_rehearsal")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        yaml.safe_dump(
            {
                # SQLAlchemy 2.1 maps postgresql:// to psycopg 3, whose SQL dagster-postgres 0.29
                # does not speak: name its driver, psycopg2
                "storage": {
                    "postgres": {
                        "postgres_url": f"postgresql+psycopg2://saber@127.0.0.1:{pg_port}/dagster_rehearsal"
                    }
                },
                # the daemon looks at the queue every second, not every 5: a stage's runs start
                # sooner, what runs is the same; and it launches them from 4 threads as the
                # chart's daemon does (deploy/helm/chart: dequeueUseThreads), not one by one
                # (a run worker takes seconds to start)
                "run_coordinator": {
                    "module": "dagster.core.run_coordinator",
                    "class": "QueuedRunCoordinator",
                    "config": {
                        "dequeue_interval_seconds": 1,
                        "dequeue_use_threads": True,
                        "dequeue_num_workers": 4,
                    },
                },
                "concurrency": {"runs": {"max_concurrent_runs": 3}, "pools": {"default_limit": 3}},
                "telemetry": {"enabled": False},
            }
        )
    )
    # one domain keeps the run count (and the test's minutes) down; still > 3 runs at a time
    # (annotation chunks, shards, indexes, runs), and the serial reference is the shared build
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    write_tiny_inputs(tmp_path)
    cfg = make_config(
        **shared_doc(tmp_path, "algebra"),
        stores={"kind": "postgres", "dsn_env": "SABER_PG_DSN"},
    )
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "SABER_CONFIG": str(cfg),
        "SABER_PG_DSN": stores_dsn,
    }
    with dagster_dev(env, tmp_path / "dagster_dev.log") as url:
        yield {"url": url, "config": cfg, "env": env, "stores_dsn": stores_dsn}


def _saber(args, env, timeout=1800):
    return subprocess.run(
        [sys.executable, "-m", "saber_assets.cli", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _no_duplicates(dsn: str) -> dict[str, int]:
    keys = {
        "llm_cache": "backend, model, prompt_version, request_hash",
        "embedding_cache": "model, revision, text_hash",
        "judgments": "run_key, query, round, a, b",
    }
    counts = {}
    with psycopg.connect(dsn) as conn:
        for table, key in keys.items():
            n, distinct = conn.execute(
                f"SELECT count(*), count(DISTINCT ({key})) FROM {table}"
            ).fetchone()
            assert n == distinct, f"{table}: {n - distinct} duplicated rows"
            counts[table] = n
    return counts


def test_build_on_a_deployment_with_postgres_stores(deployment, shared_build):
    env = deployment["env"]
    # every stage up to the board (rehearsal.STAGES), which is what the serial build is compared
    # on: the 17 runs of the whole build took 175 s of CPU (2 cores), most of it Dagster's run
    # workers starting
    build = ["build", "--config", str(deployment["config"]), "--on", deployment["url"], *STAGES]
    t0 = time.monotonic()
    out = _saber(build, env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    concurrent_s = time.monotonic() - t0
    print(out.stdout.splitlines()[-1])
    launched = int(out.stdout.splitlines()[-1].split(": ")[1].split(" runs")[0])
    assert launched > 10 and "peak" in out.stdout
    counts = _no_duplicates(deployment["stores_dsn"])
    assert counts["judgments"] > 0 and counts["embedding_cache"] > 0
    # a second build launches nothing
    again = _saber(build, env)
    assert again.returncode == 0 and "0 runs launched" in again.stdout, again.stdout[-2000:]
    # the same benchmark and leaderboard as the serial in-process build of the same config on
    # DuckDB stores (the session's shared build)
    a = Path(env["SABER_HOME"]) / "tiny"
    b = shared_build("algebra").home / "tiny"
    qa = pl.read_parquet(a / "benchmark" / "queries.parquet").sort("id")
    qb = pl.read_parquet(b / "benchmark" / "queries.parquet").sort("id")
    assert qa.select("id", "candidates").equals(qb.select("id", "candidates"))
    assert qa["relevance_scores"].to_list() == qb["relevance_scores"].to_list()
    la = pl.read_csv(a / "leaderboard" / "leaderboard.csv").sort("retriever", "setting")
    lb = pl.read_csv(b / "leaderboard" / "leaderboard.csv").sort("retriever", "setting")
    assert la.select("retriever", "setting", "ndcg@10").equals(
        lb.select("retriever", "setting", "ndcg@10")
    )
    print(json.dumps({**counts, "concurrent_s": concurrent_s}))
