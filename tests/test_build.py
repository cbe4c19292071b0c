"""End-to-end: the `saber build` command and the Dagster code location."""

import json
import re
import subprocess
import sys

import duckdb
import polars as pl
import pytest

from saber_assets.cli import main
from saber_assets.settings import REPO_ROOT

from .conftest import write_jsonl


@pytest.fixture
def tiny_config(tmp_path, make_config, monkeypatch):
    """A 330-problem corpus (a JSONL source with a bad row + a MATH sample) through every stage."""
    monkeypatch.setenv("SABER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    rows = [
        {
            "id": i,
            "problem": f"Problem {i}: find the {i}-th prime number and prove it.",
            "solution": f"Sieve up to {i * 10}.",
        }
        for i in range(30)
    ]
    rows.append({"id": 99, "problem": "", "solution": "orphan"})
    src = write_jsonl(tmp_path / "mine.jsonl", rows)
    registry = tmp_path / "retrievers.yaml"
    registry.write_text(
        "retrievers:\n  - {name: bm25, kind: bm25}\n  - {name: jaccard-no-tok, kind: jaccard, params: {tokenizer: plain}}\n"
    )

    def _make(**extra):
        corpus = {
            "sources": [
                {
                    "name": "mine",
                    "path": str(src),
                    "fields": {"id": "id", "problem": "problem", "solution": "solution"},
                },
                {"name": "math", "bundled": "math", "sample_size": 300},
            ]
        }
        small = {
            "signals": {
                "rows_per_shard": 128,
                "shards": 2,
                "floor_topic": 0.3,
                "floor_summary": 0.1,
            },
            "candidates": {
                "queries_per_domain": 2,
                "candidates_per_group": 3,
                "quota_per_domain": 3,
                "topic_threshold": 0.5,
                "summary_threshold": 0.2,
            },
            "tournament": {"rounds": 4},
            "leaderboard": {"registry": str(registry), "bootstrap_resamples": 100},
        }
        return make_config(name="tiny", corpus=corpus, **small, **extra)

    return _make


def test_saber_build_runs_every_stage(tiny_config, tmp_path, capsys):
    assert main(["build", "--config", str(tiny_config())]) == 0
    out = capsys.readouterr().out
    assert "CHECK FAILED" not in out
    assert re.search(r"corpus_quarantine\s+rows=1\n", out) and re.search(
        r"ontology_tree\s+rows=17022\n", out
    )
    home = tmp_path / "home" / "tiny"
    corpus = pl.read_parquet(home / "parquet" / "corpus.parquet")
    assert 300 <= corpus.height <= 330 and corpus["id"].str.starts_with("math:").sum() <= 300
    ann = pl.read_parquet(home / "parquet" / "problem_annotations.parquet")
    assert ann["id"].to_list() == corpus["id"].to_list()  # corpus order
    assert ann["topic_status"].is_in(["ok", "no_topics"]).all()
    ratings = pl.read_parquet(home / "parquet" / "relevance_ratings")
    assert ratings.height > 0 and ratings["rating"].min() == 0 and ratings["rating"].max() == 5
    board = pl.read_csv(home / "leaderboard" / "leaderboard.csv")
    assert board.height == 6 and set(board["retriever"]) == {"bm25", "jaccard-no-tok"}
    assert set(board["judge_backend"]) == {"cpu"}
    with duckdb.connect(str(home / "warehouse.duckdb")) as conn:
        assert (
            conn.execute("SELECT sum(problems) FROM corpus_by_source").fetchone()[0]
            == corpus.height
        )
        assert conn.execute("SELECT count(*) FROM ontology_tree").fetchone()[0] == 17022
        assert conn.execute("SELECT count(*) FROM leaderboard WHERE rank = 1").fetchone()[0] >= 3
        assert conn.execute("SELECT count(*) FROM judgments").fetchone()[0] > 0
    # Run history is kept in the project-local Dagster home.
    assert (tmp_path / "home" / "dagster_home" / "dagster.yaml").exists()


def test_saber_build_reports_a_bad_ontology(tiny_config, tmp_path, capsys):
    dag = tmp_path / "cyc.json"
    dag.write_text(
        json.dumps(
            {
                "nodes": [{"id": k, "title": k} for k in "RAB"],
                "edges": [["R", "A"], ["A", "B"], ["B", "A"]],
            }
        )
    )
    assert main(["build", "--config", str(tiny_config(ontology={"nodes": str(dag)}))]) == 1
    err = capsys.readouterr().err
    assert "FAILED step ontology_tree" in err and "cyc.json: the ontology has a cycle" in err


def test_bad_config_is_reported_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncorpus: {sources: [{name: a, bundled: math, priorty: 3}]}\n")
    assert main(["build", "--config", str(bad)]) == 2
    assert "Extra inputs are not permitted" in capsys.readouterr().err


def test_dagster_definitions_validate():
    proc = subprocess.run(
        [sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
