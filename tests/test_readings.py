"""Every generated sentence against the table it reads: each figure it states is checked, and
a moved input moves the sentence. (The readings tested beside their analyses are listed in
docs/analyses.md, "Readings and their tests".)"""

from __future__ import annotations

import polars as pl

from saber_assets.analyses.judging_regimes import read_regimes
from saber_assets.analyses.mteb import read_mteb
from saber_assets.analyses.robustness import read_robustness, read_robustness_section
from saber_assets.benchmark.data import failed_check_lines, verification_line
from saber_assets.candidates.coverage import COVERAGE_SCHEMA, coverage_lines
from saber_assets.leaderboard.board_markdown import (
    coverage_note,
    joint_paragraph,
    superscript_board,
)
from saber_assets.site import report as rp

COVERAGE = pl.DataFrame(
    [
        ("Algebra", 900, 850, 120, 20, 20, "at quota"),
        ("Geometry", 300, 280, 12, 12, 20, "below quota: 12 viable queries"),
    ],
    schema=COVERAGE_SCHEMA,
    orient="row",
)


def test_coverage_in_the_report_the_board_and_the_console():
    text = rp.read_coverage(COVERAGE)
    assert text == (
        "1 of 2 domains fall below their quota: Geometry has 12 of 20 (12 viable queries)."
    )
    full = COVERAGE.with_columns(queries=pl.lit(20))
    assert rp.read_coverage(full) == "Every domain holds its quota of 20 queries."
    note = coverage_note(COVERAGE.to_dicts())
    assert "- Geometry: 12 of 20 queries, below quota: 12 viable queries" in note
    assert "Algebra" not in note
    assert coverage_note(full.to_dicts()).startswith("Every domain holds its quota of 20 queries")
    lines = coverage_lines(COVERAGE)
    assert lines[0] == "Algebra     20/20 queries  ok     (900 problems, 850 annotated, 120 viable)"
    assert lines[1] == "Geometry    12/20 queries  SHORT  (300 problems, 280 annotated, 12 viable)"
    assert lines[2].strip() == "below quota: 12 viable queries"


def test_the_mteb_correlation_reading():
    table = pl.DataFrame({"setting": ["statement-statement"], "subset": ["dense"], "n": [7],
                          "pearson": [0.8123], "spearman": [0.6071]})  # fmt: skip
    assert read_mteb(table) == (
        "Correlation of nDCG@10 with MTEB retrieval scores: statement-statement (dense models, "
        "n=7): Pearson 0.812, Spearman 0.607."
    )
    assert "Pearson -0.250" in read_mteb(table.with_columns(pearson=pl.lit(-0.25)))


ROBUST = pl.DataFrame(
    {
        "setting": ["s1", "s1", "s2", "s2", "s1"],
        "check": ["linear", "judge", "linear", "judge", "halves"],
        "tau": [0.95, 0.86, 1.0, 0.9, 0.7],
        "flips": [1, 3, 0, 2, None],
        "detail": ["", "agreement 0.842; mean |ΔnDCG@10| 0.0021", "", "x", ""],
    }
)


def test_the_robustness_reading_states_each_checks_range_and_the_weakest():
    text = read_robustness(ROBUST, 0.842, "SmolLM2")
    assert "linear gain: τ 0.950–1.000 over the settings, 1 pair(s) flip" in text
    assert "the second judge (SmolLM2): τ 0.860–0.900 over the settings, 5 pair(s) flip" in text
    assert "half of the queries: τ 0.700–0.700 over the settings" in text
    assert "agrees with the first on 84.2% of the re-judged pairs" in text
    assert "The least stable is halves in s1 (τ 0.700)" in text
    moved = ROBUST.with_columns(tau=pl.Series([0.95, 0.5, 1.0, 0.9, 0.7]))
    assert "The least stable is judge in s1 (τ 0.500)" in read_robustness(moved, None, "j")
    section = read_robustness_section(ROBUST)
    assert section.endswith("Second judge: agreement 0.842; mean |ΔnDCG@10| 0.0021.")


def test_the_judging_regimes_reading():
    summary = pl.DataFrame(
        {"regime": ["pairwise", "absolute_grades", "pairwise"],
         "delta_r_at_least": [0, 0, 5], "pairs": [400, 400, 120],
         "agreement": [0.81, 0.64, 0.9], "tie_share": [0.0, 0.31, 0.0]}
    )  # fmt: skip
    text = read_regimes(summary)
    assert text.startswith("Agreement with the tournament's BT order on 400 sampled pairs")
    assert "pairwise 0.810 (0% ties); absolute grades 0.640 (31% ties)" in text
    assert "0.9" not in text.split(":")[1].split(".")[0]  # the Δr ≥ 5 row is the table's


def test_the_significance_legend_gives_each_row_the_letters_it_beats():
    board = pl.DataFrame({"retriever": ["x", "y", "z"], "setting": ["s"] * 3,
                          "ndcg@10": [0.8, 0.7, 0.6], "rank_ci": ["1", "2–3", "2–3"],
                          "beats": ["y, z", "z", None]})  # fmt: skip
    legend = superscript_board(board)
    assert "| a | x | 0.8000<sup>bc</sup> | 1 |" in legend
    assert "| b | y | 0.7000<sup>c</sup> | 2–3 |" in legend
    assert "| c | z | 0.6000 | 2–3 |" in legend
    moved = superscript_board(board.with_columns(beats=pl.Series(["z", None, None])))
    assert "| a | x | 0.8000<sup>c</sup> | 1 |" in moved and "<sup>c</sup> | 2–3" not in moved


def test_the_judge_noise_paragraph_counts_the_separable_pairs():
    separable = pl.DataFrame({"setting": ["s"], "pairs": [66], "separable_query_only": [40],
                              "separable_joint": [31]})  # fmt: skip
    text = joint_paragraph(separable, None)
    assert "- s: 40 of 66 over the queries, 31 over the queries and the judgments" in text
    assert "centred on `ndcg_corrected`" in text
    assert joint_paragraph(None, "the bundle has no judgments") == (
        "**Judge noise:** not carried into these intervals: the bundle has no judgments.\n\n"
    )


def test_the_verdict_and_the_failed_checks_in_words():
    passed = {"verification": {"passed": True, "checked": {"grade": 3000, "nDCG": 168},
                               "differences": 0}}  # fmt: skip
    assert verification_line(passed) == (
        "Verified: 3,168 published numbers recomputed from the benchmark's own files "
        "(`saber verify`), all agree."
    )
    failed = {"verification": {"passed": False, "checked": {"grade": 3000, "nDCG": 168},
                               "differences": 7}}  # fmt: skip
    assert verification_line(failed).startswith("NOT verified: 7 of 3,168 published numbers")
    assert verification_line({}).startswith("Not verified: no `saber verify` verdict")
    checks = [
        {"check": "judge_position_bias", "domain": "Algebra", "passed": False,
         "description": "the first-shown candidate won 900 of 1000"},
        {"check": "judge_position_bias", "domain": "Geometry", "passed": True,
         "description": "fine"},
    ]  # fmt: skip
    assert failed_check_lines(checks) == [
        "judge_position_bias (Algebra): the first-shown candidate won 900 of 1000"
    ]
    assert failed_check_lines([{**checks[0], "passed": True}]) == []


def test_an_interval_prints_three_decimals_whatever_its_rounding():
    """ "0.7" was printed for 0.700 in nine interval strings of the report's board."""
    import polars as pl

    from saber_assets.lib.sections import interval_text

    frame = pl.DataFrame({"lo": [0.7, 0.12345], "hi": [0.81, 1.0]})
    got = frame.select(interval_text("lo", "hi").alias("ci"))["ci"].to_list()
    assert got == ["[0.700, 0.810]", "[0.123, 1.000]"]
