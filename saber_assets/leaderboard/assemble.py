"""The leaderboard from the retrievers' scored rows (``board_of``): the joint intervals, the
paired tests between systems, the rank intervals, what each row significantly beats and the tie
groups, in the board's order. Pure: no Dagster, no files (``leaderboard/assets.py`` reads the
runs and writes the ``Board``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.config import LeaderboardConfig
from saber_assets.leaderboard.board import Board, BoardSettings, metric_column
from saber_assets.leaderboard.joint import JointBoard, joint_intervals
from saber_assets.leaderboard.significance import (
    beats_column,
    significance_tables,
    undecided_column,
)

SCORED = ["retriever", "query_id", "setting", "domains", "ndcg"]  # what the tests read of a run


@dataclass
class Made:
    """A board and how it was made: why it has no joint intervals (None: it has them), and the
    seconds of the joint intervals and of the paired tests."""

    board: Board
    no_joint: str | None
    joint_seconds: float
    test_seconds: float


def board_of(
    tables: list[pl.DataFrame],
    runs: list[pl.DataFrame],
    bench: Benchmark,
    lb: LeaderboardConfig,
    seed: int,
    excluded: set[str] = frozenset(),
    with_runs: Sequence[str] = (),
) -> Made:
    """The board of the entries' rows (``tables``, one a retriever) and their runs (``runs``,
    each with its per-query nDCG, failures and scores): the joint intervals and the rounds
    curve where the judgments allow, the tests, the tie groups, one system under two names said
    so, and the settings ``saber verify`` reads. ``with_runs`` names every retriever with run
    files; those without a row are listed as off the board."""
    t0 = time.perf_counter()
    joint, curve, no_joint = joint_intervals(
        bench, pl.concat([r.select(*SCORED, "failed", "scores") for r in runs]), k=lb.k,
        ties="numpy" if lb.ties == "order" else "average", resamples=lb.bootstrap_resamples,
        curve_draws=lb.resolution_draws, seed=seed, alpha=lb.alpha,
    )  # fmt: skip
    joint_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    scored = pl.concat([r.select(SCORED) for r in runs])
    table, tests = assemble_board(
        tables, scored, bench.domain_list(), metric_column(lb.k),
        bench.manifest.get("judge_backend", "unknown"), resamples=lb.bootstrap_resamples,
        test_resamples=lb.test_resamples, seed=seed, alpha=lb.alpha, joint=joint,
    )  # fmt: skip
    test_seconds = time.perf_counter() - t0
    # one system under two names (a re-ranker whose depth covers every candidate) is said so
    table = table.join(same_scores(scored), on=["setting", "retriever"], how="left")
    on_board = set(table["retriever"].to_list())
    settings = BoardSettings(
        lb.k, lb.ties, lb.bootstrap_resamples, lb.test_resamples, seed, lb.alpha,
        tuple(sorted(excluded)), tuple(sorted(n for n in with_runs if n not in on_board)),
    )  # fmt: skip
    return Made(Board(table, tests, settings, curve), no_joint, joint_seconds, test_seconds)


def tie_groups(
    board: pl.DataFrame, tests: pl.DataFrame, metric: str, better_column: str = "better",
    name: str = "tie_group",
) -> pl.DataFrame:  # fmt: skip
    """(setting, retriever, ``name``): per setting, systems in score order, a new group opening
    at the first one the paired test (Holm-corrected, overall; ``better_column`` says which
    test) puts below the current group's top. Within a group no system is separable from the
    group's first."""
    overall = tests.filter(pl.col("domain") == "Overall") if tests.height else tests
    better = {
        (s, a, b): w
        for s, a, b, w in overall.select("setting", "a", "b", better_column).iter_rows()
    } if overall.height and better_column in overall.columns else {}  # fmt: skip
    rows = []
    for (setting,), part in board.sort(metric, descending=True).group_by(
        "setting", maintain_order=True
    ):
        group, top = 0, None
        for system in part["retriever"]:
            won = better.get((setting, top, system)) or better.get((setting, system, top))
            if top is None or won == top:
                group, top = group + 1, system
            rows.append((setting, system, group))
    return pl.DataFrame(
        rows, orient="row",
        schema={"setting": pl.String, "retriever": pl.String, name: pl.Int64},
    )  # fmt: skip


def same_scores(runs: pl.DataFrame) -> pl.DataFrame:
    """(setting, retriever, same_scores_as): per setting, the other systems whose nDCG on every
    query is this one's (to 1e-12, on the same queries; a failed query scores 0): one system
    under two names on this board, e.g. a re-ranker whose depth covers every candidate and its
    re-ranking model. Null where none."""
    schema = {"setting": pl.String, "retriever": pl.String, "same_scores_as": pl.String}
    if runs.height == 0:
        return pl.DataFrame(schema=schema)
    rows = []
    frame = runs.unique(["retriever", "setting", "query_id"], keep="first").sort("query_id")
    for (setting,), part in frame.group_by("setting", maintain_order=True):
        signature: dict[str, tuple] = {}
        for (name,), mine in part.group_by("retriever", maintain_order=True):
            signature[name] = tuple(
                (qid, round(float(ndcg or 0.0), 12))
                for qid, ndcg in mine.select("query_id", "ndcg").iter_rows()
            )
        for name in sorted(signature):
            same = [o for o in sorted(signature) if o != name and signature[o] == signature[name]]
            rows.append((setting, name, ", ".join(same) or None))
    return pl.DataFrame(rows, orient="row", schema=schema)


def separable_pairs(tests: pl.DataFrame) -> pl.DataFrame:
    """Per setting (overall tests): how many system pairs the query-only test orders, and how
    many the joint test does (null without joint tests)."""
    overall = tests.filter(pl.col("domain") == "Overall") if tests.height else tests
    if overall.height == 0:
        return pl.DataFrame(schema={"setting": pl.String, "pairs": pl.UInt32,
                                    "separable_query_only": pl.UInt32})  # fmt: skip
    joint = (
        [pl.col("better_joint").is_not_null().sum().alias("separable_joint")]
        if "better_joint" in overall.columns and overall["p_joint"].is_not_null().any()
        else []
    )
    if joint and "near_threshold_joint" in overall.columns:  # the draws' own error, as a range
        near = pl.col("near_threshold_joint").fill_null(False)
        joint += [
            (pl.col("better_joint").is_not_null() & ~near).sum().alias("separable_joint_low"),
            (pl.col("better_joint").is_not_null() | near).sum().alias("separable_joint_high"),
        ]
    return (
        overall.group_by("setting")
        .agg(
            pl.len().alias("pairs"),
            pl.col("better").is_not_null().sum().alias("separable_query_only"),
            *joint,
        )  # fmt: skip
        .sort("setting")
    )


def assemble_board(
    tables: list[pl.DataFrame],
    runs: pl.DataFrame,
    domains: list[str],
    metric: str,
    judge: str,
    *,
    resamples: int,
    test_resamples: int,
    seed: int,
    alpha: float,
    joint: JointBoard | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(board, tests): the entries' rows (``rows.entry_rows``, one table per retriever) with the
    judge, the rank interval, ``beats`` and ``tie_group``, sorted by setting and score; ``runs``
    the per-query nDCG of every retriever (retriever, query_id, setting, domains, ndcg). With
    ``joint`` (``joint.joint_board``), the joint intervals beside the query-only ones, the joint
    test beside each overall pair's and the joint test's tie groups."""
    tests, ranks = significance_tables(runs, domains, resamples, test_resamples, seed, alpha)
    if joint is not None and tests.height:
        tests = tests.join(
            joint.tests.select("setting", "a", "b", "p_joint", "p_joint_holm", "better_joint",
                               "near_threshold_joint")  # fmt: skip
            .with_columns(domain=pl.lit("Overall")),
            on=["setting", "domain", "a", "b"], how="left",
        )  # fmt: skip
    board = (
        pl.concat(tables, how="diagonal")
        .with_columns(pl.lit(judge).alias("judge_backend"))
        .join(ranks.select("setting", "retriever", "rank_ci"), on=["setting", "retriever"],
              how="left")
        .join(beats_column(tests), on=["setting", "retriever"], how="left")
        .join(undecided_column(tests), on=["setting", "retriever"], how="left")
        .select("retriever", "kind", "setting", pl.all().exclude("retriever", "kind", "setting"))
        .sort("setting", metric, descending=[False, True])
    )  # fmt: skip
    if joint is not None:
        board = board.join(joint.rows, on=["setting", "retriever"], how="left")
    board = board.join(tie_groups(board, tests, metric), on=["setting", "retriever"])
    if joint is not None:
        board = board.join(
            tie_groups(board, tests, metric, "better_joint", "tie_group_joint"),
            on=["setting", "retriever"],
        )
    return board, tests
