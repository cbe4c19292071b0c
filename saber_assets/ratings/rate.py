"""From stored judgments to graded relevance: per query, Bradley–Terry strengths of its
candidates (winner beats loser) rescaled to [0, 5]. Pure; the ratings asset calls it."""

from __future__ import annotations

import numpy as np
import polars as pl

from saber_assets.config import PipelineConfig
from saber_assets.ratings.bradley_terry import Prior, fit_many, rescale
from saber_assets.ratings.soft import estimate_strengths


def configured_prior(cfg: PipelineConfig) -> Prior:
    """The Bradley–Terry prior of ``ratings.prior`` (``ratings.c`` for l2, ``tournament.alpha``
    for choix): the final fit and the adaptive policies' refits use the same one."""
    return Prior(cfg.ratings.prior, c=cfg.ratings.c, alpha=cfg.tournament.alpha)


def comparisons(judgments: pl.DataFrame, candidates: list[str]) -> list[tuple[int, int]]:
    """(winner index, loser index) of one query's decided judgments (columns a, b, winner)."""
    idx = {c: k for k, c in enumerate(candidates)}
    out = []
    for a, b, w in judgments.select("a", "b", "winner").iter_rows():
        if w is None:
            continue
        if w not in (a, b):
            raise ValueError(f"judgment of ({a}, {b}) names winner {w!r}, neither of the two")
        out.append((idx[w], idx[b if w == a else a]))
    return out


def soft_measurements(
    judgments: pl.DataFrame, candidates: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first index, second index, P(first better)) of the judgments that carry a probability."""
    idx = {c: k for k, c in enumerate(candidates)}
    if "p_first" not in judgments.columns:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
    rows = judgments.filter(pl.col("p_first").is_not_null() & pl.col("winner").is_not_null())
    first = [idx[f] for f in rows["shown_first"].to_list()]
    second = [
        idx[b if f == a else a] for f, a, b in rows.select("shown_first", "a", "b").iter_rows()
    ]
    return np.array(first, dtype=int), np.array(second, dtype=int), rows["p_first"].to_numpy()


def rate(
    candidates: pl.DataFrame, judgments: pl.DataFrame, prior: Prior, soft: bool = False
) -> pl.DataFrame:
    """One row per (query, candidate) of ``candidates`` (query_id, candidate_id, position, …) with
    strength, rating in [0, 5] and games played; a candidate that never played gets the prior.
    ``soft`` (the efficient policy): strengths from the judges' probabilities where they carry
    some (``soft.fit_soft``), else Bradley–Terry on the decisions."""
    cands = candidates.sort("query_id", "position")
    by_query = (
        {k[0]: f for k, f in judgments.partition_by("query", as_dict=True).items()}
        if judgments.height
        else {}
    )
    queries = []
    for qid in cands["query_id"].unique(maintain_order=True).to_list():
        ids = cands.filter(pl.col("query_id") == qid)["candidate_id"].to_list()
        j = by_query.get(qid)
        queries.append((qid, ids, comparisons(j, ids) if j is not None else []))
    fits = fit_many([(len(ids), comps) for _, ids, comps in queries], prior) if queries else []
    if soft:
        for k, (qid, ids, comps) in enumerate(queries):
            j = by_query.get(qid)
            if j is not None:
                fits[k] = estimate_strengths(len(ids), *soft_measurements(j, ids), comps, prior)
    parts = []
    for (qid, ids, comps), strength in zip(queries, fits, strict=True):
        games = np.zeros(len(ids), dtype=np.int64)
        for w, lo in comps:
            games[w] += 1
            games[lo] += 1
        parts.append(
            pl.DataFrame(
                {
                    "query_id": [qid] * len(ids),
                    "candidate_id": ids,
                    "strength": strength,
                    "rating": rescale(strength),
                    "games": games,
                },
                schema={
                    "query_id": pl.String,
                    "candidate_id": pl.String,
                    "strength": pl.Float64,
                    "rating": pl.Float64,
                    "games": pl.Int64,
                },
            )
        )
    if not parts:
        return cands.with_columns(
            pl.lit(None, pl.Float64).alias("strength"),
            pl.lit(None, pl.Float64).alias("rating"),
            pl.lit(None, pl.Int64).alias("games"),
        )
    # joined by key, not by position: the result never depends on a grouping order
    return cands.join(pl.concat(parts), on=["query_id", "candidate_id"], how="left")
