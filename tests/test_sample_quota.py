"""The README's default build (configs/sample.yaml) makes a whole benchmark: every domain has
its quota of viable queries once the CPU summarizer has given nearly every problem a core idea
(with the extractive one it replaced, Calculus and Analysis had none), and the domain that was
empty is drawn to its quota; what the build prints says so."""

from __future__ import annotations

import subprocess
import sys

import polars as pl
import pytest
import yaml

from saber_assets.config import REPO_ROOT, load_config

SAMPLE = REPO_ROOT / "configs" / "sample.yaml"
STAGES = ("sources", "annotations", "signal-inputs", "shards", "thresholds", "domains")


@pytest.mark.e2e
def test_the_sample_reaches_every_domains_quota(tmp_path):
    env = {"SABER_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    # the sample's config with one Swiss round, not 20: the candidates (what this test reads)
    # do not read the tournament's section, and its 20 rounds judged 5,640 pairs (9 s)
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["tournament"]["rounds"] = 1
    config = tmp_path / "sample.yaml"
    config.write_text(yaml.safe_dump(doc))
    cmd = [sys.executable, "-m", "saber_assets.cli", "build", "--config", str(config)]
    for stage in STAGES:
        cmd += ["--select", stage]
    # the domains stage of the domain the old summarizer left empty only: the rest is the
    # thresholds' count (the candidates draw each domain's queries from exactly those)
    cmd += ["--select", "domain=Calculus and Analysis"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    quota = load_config(SAMPLE).candidates.quota_per_domain
    home = tmp_path / "home" / "sample" / "parquet"
    thresholds = pl.read_parquet(home / "relevance_thresholds.parquet")
    assert thresholds.height == 5
    short = thresholds.filter(pl.col("viable_queries") < quota)
    assert short.is_empty(), short.select("domain", "queries_in_domain", "viable_queries")
    summaries = pl.read_parquet(home / "solution_summaries")
    assert (summaries["status"] == "ok").mean() >= 0.95  # the extractive summarizer: 0.52
    calculus = pl.read_parquet(home / "query_candidates" / "Calculus and Analysis.parquet")
    assert calculus["query_id"].n_unique() == quota
    # the console: no Dagster log by default, the step lines, no line of Dagster's DEBUG
    assert " - DEBUG - " not in proc.stdout + proc.stderr
    assert "query_candidates [Calculus and Analysis]" in proc.stdout


def test_coverage_counts_the_funnel_and_names_where_it_narrows():
    from saber_assets.candidates.coverage import domain_coverage

    ann = pl.DataFrame(
        {
            "topics": [[1], [2], [3], [], [4], [5]],
            "summary": ["Use x.", None, "Use y.", "Use z.", "Use w.", "Use v."],
            "domains": [["A"], ["A"], ["A", "B"], [], ["B"], ["C"]],
        }
    )
    thresholds = pl.DataFrame(
        {"domain": ["A", "B", "C"], "viable_queries": [2, 1, 0],
         "topic_threshold": [0.5] * 3, "summary_threshold": [0.25] * 3}
    )  # fmt: skip
    cov = domain_coverage(ann, thresholds, {"A": 2, "B": 1}, quota=2)
    rows = {r["domain"]: r for r in cov.iter_rows(named=True)}
    assert (rows["A"]["problems"], rows["A"]["annotated"], rows["A"]["queries"]) == (3, 2, 2)
    assert rows["A"]["status"] == "at quota"
    assert rows["B"]["problems"] == 2 and rows["B"]["annotated"] == 2
    assert "only 1 of its 2 annotated problems are viable" in rows["B"]["status"]
    assert "topic > 0.500, summary > 0.250" in rows["B"]["status"]
    assert rows["C"]["status"] == "below quota: the corpus has only 1 problems in this domain"
    # without the annotation rule every problem with topics is in the pools
    loose = domain_coverage(ann, thresholds, {}, quota=2, require_annotations=False)
    assert loose.filter(pl.col("domain") == "A")["annotated"].item() == 3
