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


def test_work_shorter_than_the_delay_draws_nothing(monkeypatch, capsys):
    monkeypatch.setenv(progress_module.ENV, "1")
    with progress("quick", 10) as shown:
        shown.advance(10)
    assert capsys.readouterr().err == ""


def test_the_console_says_which_domain_is_short_and_why(tmp_path):
    """`saber build`'s closing lines from a benchmark's manifest: each domain against its quota,
    the reason under a short one."""
    from saber_assets.build.run import benchmark_lines

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

    from saber_assets.build.run import board_lines
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
