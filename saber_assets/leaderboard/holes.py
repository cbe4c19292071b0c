"""The full-corpus track's holes, counted and filled: the documents a system ranks in its top k
over the whole corpus that no tournament graded. Pure: the ``full_corpus_fill`` asset calls it.

Before any fill, a hole counts twice: ``judged@k`` (the share of a top k with a grade) and the
full-corpus nDCG@k with every hole as 0 (the BEIR/MTEB convention, which penalises exactly the
system that finds what the pools missed), beside the condensed nDCG'@k (holes removed).

A hole is filled on the query's own Bradley–Terry scale: it plays a few games against rated
candidates spread over the scale, judged by the tournament's judge, prompt and presentation rule;
its strength is fitted with the candidates' strengths held fixed (the ratings' prior on it alone)
and mapped by the query's own min–max onto [0, 5], clamped. The tournament's grades never move.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import polars as pl

from saber_assets.leaderboard.board import CI_HIGH, CI_LOW
from saber_assets.leaderboard.significance import beats, paired_tests
from saber_assets.lib.correlation import kendall_tau_b
from saber_assets.ratings.bradley_terry import Prior, prior_terms
from saber_assets.runs.metrics import graded_ndcg, judged_at, summarize

HOLE_SCHEMA = {"query_id": pl.String, "document_id": pl.String, "pooled_by": pl.List(pl.String)}
FILL_SCHEMA = {
    "query_id": pl.String, "document_id": pl.String, "grade": pl.Float64,
    "strength": pl.Float64, "games": pl.Int64, "wins": pl.Int64,
    "opponents": pl.List(pl.String),
    # each game's outcome beside its opponent: 1 the hole won, 0 lost, null no answer
    "outcomes": pl.List(pl.Float64),
    "pooled_by": pl.List(pl.String),
}  # fmt: skip


def pooled_holes(runs: pl.DataFrame, graded: Mapping[str, set[str]], k: int) -> pl.DataFrame:
    """Each (query, document) in some run's full-corpus top ``k`` (``runs``: retriever,
    query_id, full_top) that the query's ``graded`` set lacks, with the systems that pooled it
    (``retriever/setting`` where runs carry a setting), sorted."""
    pooled: dict[tuple[str, str], set[str]] = {}
    has_setting = "setting" in runs.columns
    cols = ["retriever", "query_id", "full_top", *(["setting"] if has_setting else [])]
    for row in runs.select(cols).iter_rows(named=True):
        who = f"{row['retriever']}/{row['setting']}" if has_setting else row["retriever"]
        for d in (row["full_top"] or [])[:k]:
            if d not in graded.get(row["query_id"], ()):
                pooled.setdefault((row["query_id"], d), set()).add(who)
    rows = [(q, d, sorted(w)) for (q, d), w in sorted(pooled.items())]
    return pl.DataFrame(rows, schema=HOLE_SCHEMA, orient="row")


def spread_opponents(
    candidates: Sequence[str], strengths: Sequence[float], games: int
) -> list[str]:
    """``games`` distinct candidates spread over the query's scale: evenly spaced in the order
    of their strengths (ties by id) from the weakest to the strongest, both ends included (they
    anchor the min–max the grade is read on); the median for one game; all where there are
    fewer."""
    order = sorted(range(len(candidates)), key=lambda i: (strengths[i], candidates[i]))
    if games >= len(order):
        return [candidates[i] for i in order]
    if games == 1:
        return [candidates[order[len(order) // 2]]]
    picks = np.round(np.linspace(0, len(order) - 1, games)).astype(int)
    return [candidates[order[p]] for p in sorted(set(picks.tolist()))]


def place_strength(
    opponents: Sequence[float], wins: Sequence[float], prior: Prior, tol: float = 1e-10
) -> float:
    """The strength that maximises the games' Bradley–Terry likelihood against opponents of
    fixed strength (``wins``: 1 won, 0 lost, 0.5 a tie) under the ratings' ``prior`` on it alone
    (the same prior as every candidate's fit: a sweep of wins stays finite)."""
    return float(place_strengths(np.array([opponents]), np.array([wins]), prior, tol)[0])


def place_strengths(
    opponents: np.ndarray, wins: np.ndarray, prior: Prior, tol: float = 1e-10
) -> np.ndarray:
    """``place_strength`` for many holes at once, one row each (holes × games; a game without
    an answer is NaN in ``wins``, left out of its row): Newton's method on every row together,
    each row's likelihood concave with the prior's curvature added."""
    played = ~np.isnan(wins)
    y = np.where(played, wins, 0.0)
    s = np.zeros(len(opponents))
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(opponents - s[:, None]))
        # the ratings' own prior, one strength a row (its curvature a scalar under l2)
        _, prior_grad, prior_curv = prior_terms(s[:, None], prior)
        grad = np.where(played, y - p, 0.0).sum(axis=1) + prior_grad[:, 0]
        curv = np.where(played, p * (1 - p), 0.0).sum(axis=1)
        curv = curv + np.broadcast_to(prior_curv, s[:, None].shape)[:, 0]
        step = grad / curv
        s = s + step
        if np.all(np.abs(step) < tol):
            return s
    raise RuntimeError("the placement's Newton iteration did not converge")


def grade_on_scale(strength: float, query_strengths: Sequence[float]) -> float:
    """A placed strength as a grade on the query's own [0, 5] scale (its candidates' min–max),
    clamped: above the best candidate is 5, below the worst 0."""
    lo, hi = float(np.min(query_strengths)), float(np.max(query_strengths))
    if hi - lo < 1e-12:
        return 2.5
    return float(np.clip(5.0 * (strength - lo) / (hi - lo), 0.0, 5.0))


# a game's decider: (query id, hole id, opponent id) -> 1.0 the hole won, 0.0 lost, None no answer
Judge = Callable[[list[tuple[str, str, str]]], list[float | None]]


def fill_holes(
    holes: pl.DataFrame,
    ratings: pl.DataFrame,
    judge: Judge,
    games: int,
    prior: Prior,
    known: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Each hole placed on its query's scale (``FILL_SCHEMA``): ``ratings`` (query_id,
    candidate_id, strength) are the scale; ``judge`` decides a batch of games at once. A game
    ``known`` holds (an earlier fill's rows: hole, opponent, outcome) is not asked again, so a
    new system pays for its own holes only; every hole is placed again on the scale as it is
    now (a rebuilt tournament moves it, and may pick other opponents). A hole whose games all
    went unanswered keeps its row with no grade (no grade is better than a guessed one), asked
    again next time."""
    known = known if known is not None else pl.DataFrame(schema=FILL_SCHEMA)
    played_before: dict[tuple[str, str, str], float] = {}
    if "outcomes" in known.columns:  # rows written before the outcomes were kept: none reused
        for q, d, opps, outs in known.select("query_id", "document_id", "opponents",
                                             "outcomes").iter_rows():  # fmt: skip
            for o, w in zip(opps or [], outs or [], strict=False):
                if w is not None:
                    played_before[(q, d, o)] = w
    scale = {
        q: (part["candidate_id"].to_list(), part["strength"].to_list())
        for (q,), part in ratings.sort("query_id", "candidate_id").group_by("query_id")
    }
    todo = []
    spread: dict[str, list[str]] = {}
    for q, d, pooled in holes.select(list(HOLE_SCHEMA)).iter_rows():
        if q not in scale:
            continue
        if q not in spread:  # every hole of a query meets the same opponents
            spread[q] = spread_opponents(*scale[q], games)
        todo.append((q, d, pooled, spread[q]))
    asked = [(q, d, o) for q, d, _, opps in todo for o in opps if (q, d, o) not in played_before]
    answers = dict(zip(asked, judge(asked) if asked else [], strict=True))
    strength_of = {q: dict(zip(*scale[q], strict=True)) for q in spread}
    width = max((len(o) for *_, o in todo), default=0)
    opp = np.zeros((len(todo), width))
    won = np.full((len(todo), width), np.nan)  # a game not played (or unanswered) stays NaN
    for n, (q, d, _, opps) in enumerate(todo):
        for g, o in enumerate(opps):
            opp[n, g] = strength_of[q][o]
            w = played_before.get((q, d, o), answers.get((q, d, o)))
            won[n, g] = np.nan if w is None else w
    answered = (~np.isnan(won)).any(axis=1)
    fitted = place_strengths(opp[answered], won[answered], prior) if answered.any() else []
    rows = iter(fitted)
    placed = []
    for n, (q, d, pooled, opps) in enumerate(todo):
        outcomes = [None if np.isnan(w) else float(w) for w in won[n][: len(opps)]]
        played = won[n][~np.isnan(won[n])]
        s = float(next(rows)) if answered[n] else None  # none answered: no grade
        placed.append(
            {"query_id": q, "document_id": d,
             "grade": None if s is None else grade_on_scale(s, scale[q][1]),
             "strength": s, "games": len(played), "wins": int((played == 1.0).sum()),
             "opponents": opps, "outcomes": outcomes, "pooled_by": pooled}
        )  # fmt: skip
    # a row that nothing moved (the same games, the same place on the same scale) is kept as it
    # was, to the bit: a new system's fill leaves every earlier grade byte-identical
    before = {(r["query_id"], r["document_id"]): r for r in known.iter_rows(named=True)}
    for n, row in enumerate(placed):
        old = before.get((row["query_id"], row["document_id"]))
        if old is not None and unmoved(old, row):
            placed[n] = {**old, "pooled_by": row["pooled_by"]}
    return pl.DataFrame(placed, schema=FILL_SCHEMA).sort("query_id", "document_id")


def unmoved(old: Mapping, new: Mapping, tol: float = 1e-9) -> bool:
    """Whether a placement is an earlier one again: the same opponents and outcomes, and a
    strength and grade within ``tol`` (the Newton iteration's own noise)."""
    if old.get("opponents") != new["opponents"] or old.get("outcomes") != new["outcomes"]:
        return False
    if old.get("grade") is None or new["grade"] is None:
        return old.get("grade") is None and new["grade"] is None
    return abs(old["strength"] - new["strength"]) < tol and abs(old["grade"] - new["grade"]) < tol


def track_rows(
    runs: pl.DataFrame, grades: Mapping[str, Mapping[str, float]], k: int
) -> pl.DataFrame:
    """Per (retriever, setting, query): judged@k and nDCG@k of its full-corpus top k against
    ``grades`` (query -> document -> grade; a document without one is 0). A query run in two
    domain partitions counts once, as on the board."""
    out = []
    once = runs.unique(["retriever", "setting", "query_id"], keep="first", maintain_order=True)
    for r in once.select("retriever", "setting", "query_id", "full_top").iter_rows(named=True):
        top, g = r["full_top"] or [], grades.get(r["query_id"], {})
        out.append({"retriever": r["retriever"], "setting": r["setting"],
                    "query_id": r["query_id"], "judged": judged_at(top, g, k),
                    "ndcg": graded_ndcg(top, g, k)})  # fmt: skip
    schema = {"retriever": pl.String, "setting": pl.String, "query_id": pl.String,
              "judged": pl.Float64, "ndcg": pl.Float64}  # fmt: skip
    # by query within a system: the order its bootstrap draws index (verify's order too)
    return pl.DataFrame(out, schema=schema).sort("retriever", "setting", "query_id")


def ordering_tau(before: pl.DataFrame, after: pl.DataFrame) -> float | None:
    """Kendall's τ-b between two boards' orderings of the same systems (retriever, ndcg)."""
    joined = before.join(after, on="retriever", suffix="_after")
    return kendall_tau_b(joined["ndcg"].to_list(), joined["ndcg_after"].to_list())


def leave_one_out(
    runs: pl.DataFrame,
    filled: Mapping[str, Mapping[str, float]],
    fills: pl.DataFrame,
    k: int,
) -> pl.DataFrame:
    """Zobel's test of pool bias, per system and setting: its filled full-corpus nDCG@k
    (``filled``: ``filled_grades``), and the same with the documents only it pooled left
    ungraded (as if it had not been in the pool); the drop is how much the pool owes to it."""
    out = []
    once = runs.unique(["retriever", "setting", "query_id"], keep="first", maintain_order=True)
    for (retriever, setting), part in once.group_by("retriever", "setting", maintain_order=True):
        who = f"{retriever}/{setting}"
        unique = {(q, d) for q, d, by in fills.select("query_id", "document_id", "pooled_by")
                  .iter_rows() if by == [who]}  # fmt: skip
        with_all, without = [], []
        for q, top in part.select("query_id", "full_top").iter_rows():
            g = filled.get(q, {})
            with_all.append(graded_ndcg(top or [], g, k))
            without.append(graded_ndcg(top or [], {d: v for d, v in g.items()
                                                    if (q, d) not in unique}, k))  # fmt: skip
        a, b = float(np.mean(with_all)), float(np.mean(without))
        out.append({"retriever": retriever, "setting": setting, "ndcg_filled": a,
                    "ndcg_without_own_holes": b, "unique_holes": len(unique), "drop": a - b})  # fmt: skip
    return pl.DataFrame(out).sort("setting", "retriever") if out else pl.DataFrame()


def filled_grades(
    base: Mapping[str, Mapping[str, float]], fills: pl.DataFrame
) -> dict[str, dict[str, float]]:
    """Query -> document -> grade: the tournament's (``base``) with the fill's holes added."""
    out = {q: dict(g) for q, g in base.items()}
    for q, d, grade in fills.select("query_id", "document_id", "grade").iter_rows():
        if grade is not None:  # a hole no game answered stays ungraded
            out.setdefault(q, {})[d] = grade
    return out


def fill_board(
    runs: pl.DataFrame,
    base: Mapping[str, Mapping[str, float]],
    fills: pl.DataFrame,
    k: int,
    resamples: int,
    seed: int,
) -> tuple[pl.DataFrame, dict[str, float | None]]:
    """The full-corpus board before and after the fill, per system and setting: judged@k and
    nDCG@k with holes as 0 (before), the same on the filled grades (after) with a bootstrap 95%
    interval over the queries (``metrics.summarize``) and the systems each beats there by the
    board's paired test (``beats_filled``), and Zobel's leave-one-out drop; and per setting,
    Kendall's τ between the orderings before and after."""
    filled = filled_grades(base, fills)
    before, after = track_rows(runs, base, k), track_rows(runs, filled, k)
    rows = []
    for (retriever, setting), b in before.group_by("retriever", "setting", maintain_order=True):
        a = after.filter((pl.col("retriever") == retriever) & (pl.col("setting") == setting))
        ci = summarize(a["ndcg"].to_list(), [[]] * a.height, [], resamples, seed)["overall"]
        rows.append({"retriever": retriever, "setting": setting, "queries": b.height,
                     f"judged@{k}": b["judged"].mean(), f"full_ndcg@{k}": b["ndcg"].mean(),
                     f"judged@{k}_filled": a["judged"].mean(), f"full_ndcg@{k}_filled": ci["mean"],
                     CI_LOW: ci["low"], CI_HIGH: ci["high"]})  # fmt: skip
    board = pl.DataFrame(rows).join(
        filled_beats(after, resamples, seed), on=["retriever", "setting"], how="left"
    )
    loo = leave_one_out(runs, filled, fills, k)
    if loo.height:
        board = board.join(
            loo.select("retriever", "setting", "unique_holes", pl.col("drop").alias("loo_drop")),
            on=["retriever", "setting"],
            how="left",
        )
    taus = {}
    for (setting,), part in board.group_by("setting", maintain_order=True):
        taus[setting] = ordering_tau(
            part.select("retriever", pl.col(f"full_ndcg@{k}").alias("ndcg")),
            part.select("retriever", pl.col(f"full_ndcg@{k}_filled").alias("ndcg")),
        )
    return board.sort("setting", f"full_ndcg@{k}_filled", descending=[False, True]), taus


def filled_beats(after: pl.DataFrame, resamples: int, seed: int) -> pl.DataFrame:
    """retriever, setting, beats_filled: the systems each beats on the filled full-corpus nDCG
    by the board's paired randomization test (Holm over the setting's pairs), over the queries
    every system of the setting ran: ``resamples`` flips a pair, grown near its threshold up to
    a hundred times as many, as the board grows its own."""
    rows = []
    for (setting,), part in after.group_by("setting", maintain_order=True):
        wide = part.pivot(on="retriever", index="query_id", values="ndcg").drop_nulls()
        names = sorted(c for c in wide.columns if c != "query_id")
        if len(names) < 2 or wide.height < 2:
            continue
        tests = paired_tests(wide.select(names).to_numpy(), names, resamples, seed,
                             max_resamples=100 * resamples)  # fmt: skip
        won = beats(tests)
        rows += [(n, setting, ", ".join(won.get(n, []))) for n in names]
    schema = {"retriever": pl.String, "setting": pl.String, "beats_filled": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def new_model_games(board: pl.DataFrame, games: int, k: int) -> tuple[int, float | None]:
    """What the fill charges a new model, from a built full-corpus board (``fill_board``'s):
    (at most: every place of every top k a hole, per setting, × ``games``; typically: the mean
    over the board's systems of the holes only they pooled, summed over settings, × ``games``)."""
    if board.is_empty():
        return 0, None
    per_setting = board.group_by("setting").agg(pl.col("queries").max())
    most = int(per_setting["queries"].sum()) * k * games
    if "unique_holes" not in board.columns:
        return most, None
    typical = board.group_by("setting").agg(pl.col("unique_holes").mean())["unique_holes"].sum()
    return most, float(typical) * games
