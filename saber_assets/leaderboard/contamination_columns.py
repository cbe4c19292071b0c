"""The leaderboard's contamination columns and what the report says of them: each checked row's
contaminated share and clean score, the rows whose rank a clean score moves (the matches
themselves are the contamination stage's, ``contamination/matches.py``)."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.contamination.matches import contaminated_queries
from saber_assets.leaderboard.board import (
    CI_HIGH,
    CI_HIGH_CLEAN,
    CI_LOW,
    CI_LOW_CLEAN,
    score_column,
)
from saber_assets.retrievers.entries import TrainingCorpus


def contamination_columns(
    rep: pl.DataFrame,
    runs: pl.DataFrame,
    bench: Benchmark,
    declared: dict[str, TrainingCorpus | None],
    matched: dict[str, set[str]],
    top: int,
    rescore: Callable[[pl.DataFrame], pl.DataFrame],
) -> pl.DataFrame:
    """The leaderboard's contamination columns of one retriever's rows (``rep``, one per
    setting): ``contaminated_share`` (its scored queries whose statement or one of their ``top``
    best-rated candidates occurs in a declared training corpus), ``{metric}_clean`` with
    ``ci_low_clean`` / ``ci_high_clean`` (``rescore`` of the runs of the other queries; null
    where none is left), and which corpora were checked and which only declared. ``matched``:
    corpus name -> the benchmark items its audit matched (a corpus with text but no audit yet
    counts as declared only, said so)."""
    metric = score_column(rep)
    checked = [n for n, c in declared.items() if c is not None and n in matched]
    unchecked = [n for n, c in declared.items() if c is None] + [
        f"{n} (not audited yet)" for n, c in declared.items() if c is not None and n not in matched
    ]
    out = rep.select("setting").with_columns(
        pl.lit(", ".join(checked)).alias("training_checked"),
        pl.lit(", ".join(unchecked)).alias("training_declared_only"),
    )
    empty = pl.DataFrame(
        schema={"setting": pl.String, "contaminated_share": pl.Float64,
                f"{metric}_clean": pl.Float64, CI_LOW_CLEAN: pl.Float64,
                CI_HIGH_CLEAN: pl.Float64}
    )  # fmt: skip
    if not checked:
        return out.join(empty, on="setting", how="left")
    bad = contaminated_queries(bench, set().union(*(matched[n] for n in checked)), top)
    scored = runs.select("setting", "query_id").unique()
    share = scored.group_by("setting").agg(
        pl.col("query_id").is_in(sorted(bad)).mean().alias("contaminated_share")
    )
    clean_runs = runs.filter(~pl.col("query_id").is_in(sorted(bad)))
    if not clean_runs.height:  # every query overlaps: no clean score
        return out.join(share, on="setting", how="left").join(
            empty.drop("contaminated_share"), on="setting", how="left"
        )
    clean = rescore(clean_runs).select(
        "setting",
        pl.col(metric).alias(f"{metric}_clean"),
        pl.col(CI_LOW).alias(CI_LOW_CLEAN),
        pl.col(CI_HIGH).alias(CI_HIGH_CLEAN),
    )
    return out.join(share, on="setting", how="left").join(clean, on="setting", how="left")


def checked_rows(board: pl.DataFrame) -> pl.DataFrame:
    """The leaderboard rows of models whose training data was checked on the text."""
    if "training_checked" not in board.columns:
        return board.clear()
    return board.filter(pl.col("training_checked").fill_null("").str.len_chars() > 0)


def rows_that_move(board: pl.DataFrame) -> pl.DataFrame:
    """Per setting, the rows whose rank changes when each checked row is scored on its clean
    queries (the others keep their full score): retriever, setting, rank full / clean, the
    full and clean scores, the contaminated share."""
    metric = score_column(board)
    clean = f"{metric}_clean"
    if clean not in board.columns:
        return pl.DataFrame()
    ranked = board.with_columns(pl.coalesce(clean, metric).alias("_effective")).with_columns(
        pl.col(metric).rank("ordinal", descending=True).over("setting").alias("rank_full"),
        pl.col("_effective").rank("ordinal", descending=True).over("setting").alias("rank_clean"),
    )
    return (
        ranked.filter(pl.col("rank_full") != pl.col("rank_clean"))
        .select("retriever", "setting", "rank_full", "rank_clean", metric, clean,
                "contaminated_share")
        .sort("setting", "rank_clean")
    )  # fmt: skip


def contamination_paragraph(board: pl.DataFrame) -> str:
    """What the report says of contamination: which rows had their training data checked, how
    much of the benchmark it covers, how far the clean score is from the full one, and where a
    checked row would rank on its clean score among the others' full scores."""
    metric = score_column(board)
    if "training_checked" not in board.columns:
        return ""
    checked = checked_rows(board)
    declared = sorted(
        {(r, d) for r, d in board.select("retriever", "training_declared_only").iter_rows() if d}
    )
    by_name = "; ".join(f"{r} ({d})" for r, d in declared)
    if checked.height == 0:
        text = "No retriever declares training data with text to check"
        return text + (f"; declared by name only, not checked: {by_name}." if declared else ".")
    parts = []
    for r in checked.sort("setting", "retriever").iter_rows(named=True):
        share, clean = r["contaminated_share"], r[f"{metric}_clean"]
        delta = "no clean query left" if clean is None else (
            f"nDCG {r[metric]:.3f} → {clean:.3f} clean [{r[CI_LOW_CLEAN]:.3f}, "
            f"{r[CI_HIGH_CLEAN]:.3f}]"
        )  # fmt: skip
        parts.append(
            f"{r['retriever']} / {r['setting']} ({r['training_checked']}): "
            f"{share:.0%} of the queries overlap, {delta}"
        )
    text = (
        "Training data checked on the text (a query counts when its statement or one of its "
        "best-rated candidates occurs in the corpus): " + "; ".join(parts) + ". "
    )
    mine = set(checked["retriever"])
    moved = [m for m in rows_that_move(board).iter_rows(named=True) if m["retriever"] in mine]
    if moved:
        text += (
            "Scored on its clean queries, against the others' full scores (different query "
            "sets: read the clean interval), "
            + "; ".join(
                f"{m['retriever']} would rank {m['rank_clean']} instead of {m['rank_full']} in "
                f"{m['setting']}"
                for m in moved
            )
            + "."
        )
    else:
        text += "No checked row changes rank when scored clean."
    if declared:
        text += f" Declared by name only, not checked: {by_name}."
    return text
