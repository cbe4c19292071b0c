"""What `saber build` prints: progress lines for long work (on a terminal only), and the
benchmark's domains against their quota at the end."""

from __future__ import annotations

import json

from saber_resources import progress as progress_module
from saber_resources.progress import progress


def test_progress_lines_are_drawn_only_where_the_build_turned_them_on(monkeypatch, capsys):
    monkeypatch.delenv(progress_module.ENV, raising=False)
    with progress("judging", 3) as shown:
        shown.advance(3)
    assert capsys.readouterr().err == ""  # tests, the UI's runs, piped output: nothing
    monkeypatch.setenv(progress_module.ENV, "1")
    monkeypatch.setattr(progress_module, "DELAY_S", 0.0)
    monkeypatch.setattr(progress_module, "REDRAW_S", 0.0)
    with progress("judging", 3, "req") as shown:
        for _ in range(3):
            shown.advance()
    err = capsys.readouterr().err
    assert "judging" in err and "3/3" in err and "req/s" in err


def test_long_work_writes_a_line_every_half_minute_into_a_log(monkeypatch, capsys):
    """In a log (no terminal), long work says where it is: done of total, rate and time left,
    at most once every LOG_EVERY_S (a clock stands in for the half minutes)."""
    clock = iter([0.0, 10.0, 31.0, 40.0, 62.0, 70.0])
    monkeypatch.setenv(progress_module.ENV, "log")
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    with progress("embedding (e5)", 100, "text") as shown:
        for _ in range(5):
            shown.advance(10)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "  embedding (e5): 20/100 text (0.6/s, ~124 s left)",
        "  embedding (e5): 40/100 text (0.6/s, ~93 s left)",
    ]


def test_work_shorter_than_the_delay_draws_nothing(monkeypatch, capsys):
    monkeypatch.setenv(progress_module.ENV, "1")
    with progress("quick", 10) as shown:
        shown.advance(10)
    assert capsys.readouterr().err == ""


def test_the_console_says_which_domain_is_short_and_why(tmp_path):
    """`saber build`'s closing lines from a benchmark's manifest: each domain against its quota,
    the reason under a short one."""
    from saber_assets.orchestration.launch import benchmark_lines

    bench = tmp_path / "benchmark"
    bench.mkdir()
    coverage = [
        {"domain": "Algebra", "problems": 600, "annotated": 590, "viable": 150, "queries": 20,
         "quota": 20, "status": "at quota"},
        {"domain": "Calculus", "problems": 100, "annotated": 40, "viable": 3, "queries": 3,
         "quota": 20, "status": "below quota: only 3 of its 40 annotated problems are viable"},
    ]  # fmt: skip
    (bench / "manifest.json").write_text(json.dumps({"coverage": coverage}))

    class Where:
        benchmark = bench

    lines = benchmark_lines(Where)  # type: ignore[arg-type]
    assert lines[0] == "23 queries over 2 domains, 1 below quota"
    assert lines[1].startswith("Algebra ") and "20/20 queries  ok" in lines[1]
    assert (
        "3/20 queries  SHORT" in lines[2] and "(100 problems, 40 annotated, 3 viable)" in lines[2]
    )
    assert lines[3].strip() == "below quota: only 3 of its 40 annotated problems are viable"


def test_the_builds_last_lines_name_who_leads_each_setting(tmp_path):
    """The first tie group of each setting, the leader's score, and whether it stands alone."""
    import polars as pl

    from saber_assets.orchestration.launch import board_lines
    from saber_assets.outputs import Outputs

    out = Outputs(tmp_path)
    assert board_lines(out) == []
    out.leaderboard.mkdir(parents=True)
    board = pl.DataFrame({
        "retriever": ["a", "b", "c", "a", "b", "c"], "setting": ["s1"] * 3 + ["s2"] * 3,
        "ndcg@10": [0.70, 0.69, 0.5, 0.8, 0.6, 0.59], "tie_group": [1, 1, 2, 1, 2, 2],
    })  # fmt: skip
    board.write_parquet(out.leaderboard / "leaderboard.parquet")
    assert board_lines(out) == [
        "leaders:   s1: a, b (ndcg@10 0.700; one tie group)",
        "           s2: a (ndcg@10 0.800; ahead of the rest, significantly)",
    ]
    board.with_columns(tie_group=pl.lit(1)).write_parquet(out.leaderboard / "leaderboard.parquet")
    assert (
        board_lines(out, most=2)[0]
        == "leaders:   s1: a, b and 1 more (ndcg@10 0.700; one tie group)"
    )


def fake_run(
    job: str, partition: str, rows: dict, success: bool = True, faults: dict | None = None
):
    """What `print_launch` and `StageSummary` read of a Dagster run result."""
    from types import SimpleNamespace

    from dagster import AssetKey, MetadataValue

    mats = []
    for asset, n in rows.items():
        metadata = {} if n is None else {"dagster/row_count": MetadataValue.int(n)}
        if faults and not mats:  # the run's first asset met them
            metadata["llm_faults"] = MetadataValue.text(json.dumps(faults))
        mats.append(SimpleNamespace(materialization=SimpleNamespace(
            asset_key=AssetKey(asset), partition=partition, metadata=metadata)))  # fmt: skip
    return SimpleNamespace(
        success=success,
        dagster_run=SimpleNamespace(job_name=job),
        get_asset_materialization_events=lambda: mats,
        get_asset_check_evaluations=lambda: [],
    )


def test_a_stage_of_many_partitions_is_one_line_in_a_log_and_one_redrawn_line_on_a_terminal():

    from saber_assets.orchestration.launch import Console, StageSummary, print_launch
    from saber_assets.orchestration.plan import Step

    for live in (False, True):
        out, drawn = [], []
        console = Console(out=out.append, err=out.append, live=drawn.append if live else None)
        summary = StageSummary(console, 3)
        for k, domain in enumerate(["Algebra", "Geometry", "Number Theory"]):
            faults = {"by_cause": {"timeout": 2}, "lost_s": 1.5} if k == 1 else None
            run = fake_run(
                "build_domains", domain, {"query_candidates": 10 + k, "index": None}, faults=faults
            )
            step = Step("build_domains", domain)
            print_launch(run, 1.0, console, summary)
            summary.step(step, run, 1.0)
        summary.close()
        # what a step says beyond its rows, then the one summary line
        assert out[0] == "  build_domains: faults met: timeout 2 (2 retries, 1.5s lost)"
        assert len(out) == 2 and out[1].startswith(
            "  3 partitions (Algebra, Geometry, Number Theory): query_candidates rows=33, index "
            "(build_domains ok in 3.0s, process peak RSS "
        ), out
        if live:  # a progress line per step, cleared before each printed line
            assert [d for d in drawn if d] == [
                "  build_domains [Algebra]  1/3  (1s)",
                "  build_domains [Geometry]  2/3  (2s)",
                "  build_domains [Number Theory]  3/3  (3s)",
            ]
            assert drawn[-1] == ""
    # a failed step prints its lines whole; the summary counts it
    out = []
    console = Console(out=out.append, err=out.append)
    summary = StageSummary(console, 2)
    for ok, domain in ((True, "A"), (False, "B")):
        run = fake_run("build_domains", domain, {"query_candidates": 1}, success=ok)
        print_launch(run, 2.0, console, summary)
        summary.step(Step("build_domains", domain), run, 2.0)
    summary.close()
    assert any("build_domains FAILED in 2.0s" in line for line in out), out
    assert "1 of 2 FAILED" in out[-1]
