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
    return pair_outcomes(judgments, candidates)[0]


def pair_outcomes(
    judgments: pl.DataFrame, candidates, both_orders: bool = False, a="a", b="b"
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(wins, ties) of one query's judgments as candidate indices: each decided judgment a win
    (winner, loser); with ``both_orders`` a pair judged in both orders (``swapped_winner``)
    is one win when the two agree, a tie when they disagree, and the other order's win when
    one answer never parsed. ``a``, ``b``: the columns naming the pair."""
    idx = {c: k for k, c in enumerate(candidates)}
    other = "swapped_winner" if both_orders and "swapped_winner" in judgments.columns else None
    wins, ties = [], []
    for x, y, w, o in judgments.select(
        a, b, "winner", other or pl.lit(None).alias("_none")
    ).iter_rows():
        for named in (w, o):
            if named is not None and named not in (x, y):
                raise ValueError(
                    f"judgment of ({x}, {y}) names winner {named!r}, neither of the two"
                )
        w, tie = both_orders_outcome(w, o)
        if tie:
            ties.append((idx[x], idx[y]))
        elif w is not None:
            wins.append((idx[w], idx[y if w == x else x]))
    return wins, ties


def both_orders_outcome(winner, swapped) -> tuple[object | None, bool]:
    """(winner, tie) of a pair judged in both orders (``swapped``: the answer with the other
    shown first; None where an answer never parsed or was not asked): agreeing answers are that
    winner, disagreeing ones a tie, a single answer decides alone."""
    if winner is not None and swapped is not None and winner != swapped:
        return None, True
    return (winner if winner is not None else swapped), False


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


FITTED = ("strength", "rating", "games")  # what ``rate`` adds to its candidates


def rate(
    candidates: pl.DataFrame,
    judgments: pl.DataFrame,
    prior: Prior,
    soft: bool = False,
    both_orders: bool = False,
) -> pl.DataFrame:
    """One row per (query, candidate) of ``candidates`` (query_id, candidate_id, position, …) with
    strength, rating in [0, 5] and games played; a candidate that never played gets the prior.
    ``soft`` (the efficient policy): strengths from the judges' probabilities where they carry
    some (``soft.fit_soft``), else Bradley–Terry on the decisions."""
    # a frame that already carries ratings (the stored relevance_ratings) is rated afresh: its
    # old columns would otherwise win the final join and the new fit be lost as `rating_right`
    cands = candidates.drop(FITTED, strict=False).sort("query_id", "position")
    by_query = (
        {k[0]: f for k, f in judgments.partition_by("query", as_dict=True).items()}
        if judgments.height
        else {}
    )
    queries = []
    for qid in cands["query_id"].unique(maintain_order=True).to_list():
        ids = cands.filter(pl.col("query_id") == qid)["candidate_id"].to_list()
        j = by_query.get(qid)
        queries.append(
            (qid, ids, *(pair_outcomes(j, ids, both_orders) if j is not None else ([], [])))
        )
    fits = (
        fit_many([(len(ids), comps) for _, ids, comps, _ in queries], prior,
                 ties=[t for *_, t in queries])
        if queries
        else []
    )  # fmt: skip
    if soft:
        for k, (qid, ids, comps, _) in enumerate(queries):
            j = by_query.get(qid)
            if j is not None:
                fits[k] = estimate_strengths(len(ids), *soft_measurements(j, ids), comps, prior)
    parts = []
    for (qid, ids, comps, ties), strength in zip(queries, fits, strict=True):
        games = np.zeros(len(ids), dtype=np.int64)
        for w, lo in [*comps, *ties]:
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
