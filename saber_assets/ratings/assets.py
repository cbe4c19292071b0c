"""ratings stage: Bradley–Terry per query, min–max rescaled to [0, 5] (graded relevance)."""

import numpy as np
import polars as pl
from dagster import AssetCheckResult, Output, StaticPartitionsDefinition, asset, asset_check

from ..ops.metadata import markdown_table
from ..resources import SaberSettings
from .bradley_terry import fit_many, rescale


def build_rating_assets(domain_partitions: StaticPartitionsDefinition) -> list:
    """relevance_ratings and its check, over the configured domain partitions."""
    ratings = asset(
        group_name="ratings",
        partitions_def=domain_partitions,
        io_manager_key="parquet_io",
        kinds={"polars", "parquet"},
    )(relevance_ratings)
    check = asset_check(
        asset=ratings,
        partitions_def=domain_partitions,
        description="3K ratings per query, min 0, max 5, no NaN.",
    )(ratings_well_formed)
    return [ratings, check]


def relevance_ratings(
    settings: SaberSettings, query_candidates: pl.DataFrame, tournament_judgments: pl.DataFrame
) -> Output[pl.DataFrame]:
    """One rating per (query, candidate) in [0, 5]; a candidate that never played gets the prior."""
    alpha = settings.load().tournament.alpha
    cands = query_candidates.sort("query_id", "position")
    decided = tournament_judgments.filter(pl.col("winner").is_not_null())
    problems, keys = [], []
    by_query = (
        {k[0]: f for k, f in decided.partition_by("query", as_dict=True).items()}
        if decided.height
        else {}
    )
    for (qid,), frame in cands.group_by("query_id", maintain_order=True):
        idx = {c: k for k, c in enumerate(frame["candidate_id"].to_list())}
        comps = []
        j = by_query.get(qid)
        if j is not None:
            for a, b, w in j.select("a", "b", "winner").iter_rows():
                loser = b if w == a else a
                comps.append((idx[w], idx[loser]))
        problems.append((frame.height, comps))
        keys.append(qid)
    fits = fit_many(problems, alpha) if problems else []
    strengths = np.concatenate(fits) if fits else np.zeros(0)
    ratings = np.concatenate([rescale(f) for f in fits]) if fits else np.zeros(0)
    games = []
    for n, comps in problems:
        g = np.zeros(n, dtype=np.int64)
        for w, lo in comps:
            g[w] += 1
            g[lo] += 1
        games.append(g)
    df = cands.select(
        "domain", "query_id", "candidate_id", "group", "topic", "summary", "position"
    ).with_columns(
        pl.Series("strength", strengths),
        pl.Series("rating", ratings),
        pl.Series("games", np.concatenate(games) if games else np.zeros(0, np.int64)),
    )
    by_group = (
        df.group_by("group")
        .agg(pl.col("rating").mean().round(3).alias("mean_rating"))
        .sort("group")
    )
    return Output(
        df,
        metadata={
            "dagster/row_count": df.height,
            "queries": len(keys),
            "alpha": alpha,
            "mean_rating_by_group": markdown_table(by_group),
            "never_played": int((df["games"] == 0).sum()),
        },
    )


def ratings_well_formed(
    settings: SaberSettings, relevance_ratings: pl.DataFrame
) -> AssetCheckResult:
    k3 = 3 * settings.load().candidates.candidates_per_group
    per_q = relevance_ratings.group_by("query_id").agg(
        pl.len().alias("n"), pl.col("rating").min().alias("lo"), pl.col("rating").max().alias("hi")
    )
    wrong_n = per_q.filter(pl.col("n") != k3).height
    wrong_range = per_q.filter(
        (pl.col("lo").abs() > 1e-9) | ((pl.col("hi") - 5).abs() > 1e-9)
    ).height
    nans = int(
        relevance_ratings["rating"].is_nan().sum() + relevance_ratings["rating"].is_null().sum()
    )
    return AssetCheckResult(
        passed=wrong_n == 0 and wrong_range == 0 and nans == 0,
        metadata={
            "queries": per_q.height,
            "expected_per_query": k3,
            "wrong_count": wrong_n,
            "not_0_to_5": wrong_range,
            "nan": nans,
        },
    )
