"""From stored judgments to graded relevance: per query, Bradley–Terry strengths of its
candidates (winner beats loser) rescaled to [0, 5]. Pure; the ratings asset calls it."""

from __future__ import annotations

import numpy as np
import polars as pl

from .bradley_terry import fit_many, rescale


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


def rate(candidates: pl.DataFrame, judgments: pl.DataFrame, alpha: float) -> pl.DataFrame:
    """One row per (query, candidate) of ``candidates`` (query_id, candidate_id, position, …) with
    strength, rating in [0, 5] and games played; a candidate that never played gets the prior."""
    cands = candidates.sort("query_id", "position")
    by_query = (
        {k[0]: f for k, f in judgments.partition_by("query", as_dict=True).items()}
        if judgments.height
        else {}
    )
    problems = []
    for (qid,), frame in cands.group_by("query_id", maintain_order=True):
        j = by_query.get(qid)
        comps = comparisons(j, frame["candidate_id"].to_list()) if j is not None else []
        problems.append((frame.height, comps))
    fits = fit_many(problems, alpha) if problems else []
    games = []
    for n, comps in problems:
        g = np.zeros(n, dtype=np.int64)
        for w, lo in comps:
            g[w] += 1
            g[lo] += 1
        games.append(g)
    return cands.with_columns(
        pl.Series("strength", np.concatenate(fits) if fits else np.zeros(0)),
        pl.Series("rating", np.concatenate([rescale(f) for f in fits]) if fits else np.zeros(0)),
        pl.Series("games", np.concatenate(games) if games else np.zeros(0, np.int64)),
    )
