"""ratings stage: Bradley–Terry per query, min–max rescaled to [0, 5] (graded relevance)."""

import polars as pl
from dagster import AssetCheckResult, Output

from saber_assets.lib.declare import stage_check, table_asset
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.pipeline import PipelineResource
from saber_assets.ratings.rate import configured_prior, rate


@table_asset(reads=("ratings", "tournament"))
def relevance_ratings(
    pipeline: PipelineResource, query_candidates: pl.DataFrame, tournament_judgments: pl.DataFrame
) -> Output[pl.DataFrame]:
    """One rating per (query, candidate) in [0, 5]; a candidate that never played gets the prior."""
    cfg = pipeline.load()
    tcfg = cfg.tournament
    prior = configured_prior(cfg)
    df = rate(
        query_candidates.select(
            "domain", "query_id", "candidate_id", "group", "topic", "summary", "position"
        ),
        tournament_judgments,
        prior,
        soft=tcfg.policy == "efficient",
        both_orders=tcfg.both_orders,
    )
    by_group = (
        df.group_by("group")
        .agg(pl.col("rating").mean().round(3).alias("mean_rating"))
        .sort("group")
    )
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "queries": df["query_id"].n_unique(),
            "prior": prior.describe(),
            "mean_rating_by_group": markdown_table(by_group),
            "never_played": int((df["games"] == 0).sum()),
        },
    )


@stage_check("relevance_ratings", description="3K ratings per query, min 0, max 5, no NaN.")
def ratings_well_formed(
    pipeline: PipelineResource, relevance_ratings: pl.DataFrame
) -> AssetCheckResult:
    k3 = 3 * pipeline.load().candidates.candidates_per_group
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
