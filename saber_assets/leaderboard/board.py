"""The leaderboard from the retrievers' scored rows: the paired tests between systems, the rank
intervals, what each row significantly beats and the tie groups, in the board's order. Pure: no
Dagster, no files (``leaderboard/assets.py`` reads the runs and writes the board)."""

from __future__ import annotations

import polars as pl

from saber_assets.leaderboard.significance import beats_column, significance_tables


def tie_groups(board: pl.DataFrame, tests: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(setting, retriever, tie_group): per setting, systems in score order, a new group opening
    at the first one the paired test (Holm-corrected, overall) puts below the current group's
    top. Within a group no system is separable from the group's first."""
    overall = tests.filter(pl.col("domain") == "Overall") if tests.height else tests
    better = {
        (s, a, b): w
        for s, a, b, w in overall.select("setting", "a", "b", "better").iter_rows()
    } if overall.height else {}  # fmt: skip
    rows = []
    for (setting,), part in board.sort(metric, descending=True).group_by(
        "setting", maintain_order=True
    ):
        group, top = 0, None
        for name in part["retriever"]:
            won = better.get((setting, top, name)) or better.get((setting, name, top))
            if top is None or won == top:
                group, top = group + 1, name
            rows.append((setting, name, group))
    return pl.DataFrame(
        rows, orient="row",
        schema={"setting": pl.String, "retriever": pl.String, "tie_group": pl.Int64},
    )  # fmt: skip


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
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(board, tests): the entries' rows (``rows.entry_rows``, one table per retriever) with the
    judge, the rank interval, ``beats`` and ``tie_group``, sorted by setting and score; ``runs``
    the per-query nDCG of every retriever (retriever, query_id, setting, domains, ndcg)."""
    tests, ranks = significance_tables(runs, domains, resamples, test_resamples, seed, alpha)
    board = (
        pl.concat(tables, how="diagonal")
        .with_columns(pl.lit(judge).alias("judge_backend"))
        .join(ranks.select("setting", "retriever", "rank_ci"), on=["setting", "retriever"],
              how="left")
        .join(beats_column(tests), on=["setting", "retriever"], how="left")
        .select("retriever", "kind", "setting", pl.all().exclude("retriever", "kind", "setting"))
        .sort("setting", metric, descending=[False, True])
    )  # fmt: skip
    return board.join(tie_groups(board, tests, metric), on=["setting", "retriever"]), tests
