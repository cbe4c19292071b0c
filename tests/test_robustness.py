"""The robustness checks: a second judge, the gain, the scale, the rating ranks, the queries."""

from itertools import combinations
from types import SimpleNamespace

import numpy as np
import polars as pl

from saber_assets.analyses.robustness import (
    agreement,
    refit_ratings,
    rejudge,
    relevance_with,
    robustness_table,
    sample_judgments,
)
from saber_assets.leaderboard.significance import kendall_tau, score_matrix
from saber_assets.ratings.bradley_terry import Prior
from saber_assets.ratings.rate import rate
from saber_assets.runs.evaluate import rescore_runs

LATENT = {f"c{i}": float(i) for i in range(8)}  # c7 is the best candidate of every query


def _world(n_queries: int = 6):
    cands, judg = [], []
    for q in range(n_queries):
        qid = f"q{q}"
        for pos, c in enumerate(LATENT):
            cands.append({"query_id": qid, "candidate_id": c, "position": pos})
        for r, (a, b) in enumerate(combinations(LATENT, 2)):
            shown = a if r % 2 else b
            judg.append({"query": qid, "round": r, "a": a, "b": b, "shown_first": shown,
                         "winner": a if LATENT[a] > LATENT[b] else b, "p_first": None})  # fmt: skip
    return pl.DataFrame(cands), pl.DataFrame(judg)


class LatentJudge:
    """Decides by the latent strength of the candidates whose text it is shown."""

    def __init__(self, reverse: bool = False) -> None:
        self.reverse = reverse

    def compare_batch(self, items):
        out = []
        for _, first, second in items:
            better_first = LATENT[first] > LATENT[second]
            out.append(SimpleNamespace(value=1 if better_first != self.reverse else 2))
        return out


TEXT = {**{f"q{q}": f"q{q}" for q in range(50)}, **{c: c for c in LATENT}}


def test_an_identical_second_judge_agrees_fully_and_changes_no_rating():
    cands, judg = _world()
    sample = sample_judgments(judg, 0.1, seed=3)
    assert sample.height == round(0.1 * judg.height)
    again = sample_judgments(judg, 0.1, seed=3)
    assert again.equals(sample)  # seeded
    # the rows read in another order (another process's hashing): the same sample
    shuffled = judg.sample(fraction=1.0, shuffle=True, seed=7)
    assert sample_judgments(shuffled, 0.1, seed=3).equals(sample)
    same = rejudge(sample, TEXT, LatentJudge())
    assert agreement(same) == (1.0, sample.height)
    # the other presentation order does not fool a judge that reads the texts
    assert agreement(rejudge(sample, TEXT, LatentJudge(), swap_order=True))[0] == 1.0
    base = refit_ratings(
        judg, same.with_columns(winner2=pl.col("winner")), cands, Prior("choix", alpha=0.01)
    )
    new = refit_ratings(judg, same, cands, Prior("choix", alpha=0.01))
    assert base.equals(new)


def test_a_judge_that_reverses_every_decision_agrees_never():
    cands, judg = _world()
    sample = sample_judgments(judg, 0.3, seed=0)
    rev = rejudge(sample, TEXT, LatentJudge(reverse=True))
    assert agreement(rev) == (0.0, sample.height)
    base = refit_ratings(
        judg, rev.with_columns(winner2=pl.col("winner")), cands, Prior("choix", alpha=0.01)
    )
    new = refit_ratings(judg, rev, cands, Prior("choix", alpha=0.01))
    assert not base.equals(new)  # the reversed decisions move the ratings


def test_the_second_judge_reaches_the_grades_when_the_candidates_carry_their_stored_ratings():
    """The asset passes the stored relevance_ratings (rating, strength, games already there):
    the refit's grades, not the stored ones, must come back (the second judge was ignored)."""
    cands, judg = _world()
    prior = Prior("choix", alpha=0.01)
    stored = rate(cands, judg, prior)
    assert {"rating", "strength", "games"} <= set(stored.columns)
    rev = rejudge(sample_judgments(judg, 0.3, seed=0), TEXT, LatentJudge(reverse=True))
    plain = refit_ratings(judg, rev, cands, prior)
    refit = refit_ratings(judg, rev, stored, prior)
    assert refit.sort("query_id", "candidate_id").equals(plain.sort("query_id", "candidate_id"))
    moved = refit.join(stored, on=["query_id", "candidate_id"], suffix="_stored")
    assert (moved["rating"] - moved["rating_stored"]).abs().max() > 0.1
    # and rating a frame that carries ratings fits it afresh
    flipped = judg.with_columns(
        winner=pl.when(pl.col("winner") == pl.col("a")).then(pl.col("b")).otherwise(pl.col("a"))
    )
    again = rate(stored, flipped, prior)
    assert again["rating"].to_list() != stored["rating"].to_list()


def _bench_and_runs(n_queries=30, seed=0):
    rng = np.random.default_rng(seed)
    doc_ids = list(LATENT)
    q = pl.DataFrame(
        {"id": [f"q{i}" for i in range(n_queries)],
         "candidates": [list(range(8))] * n_queries,
         "relevance_scores": [sorted(rng.uniform(0, 5, 8).tolist()) for _ in range(n_queries)]},
    )  # fmt: skip
    rel = dict(zip(q["id"], q["relevance_scores"].to_list(), strict=True))
    rows = []
    for name, noise in (("good", 0.2), ("mid", 1.0), ("bad", 3.0)):
        for qid, r in rel.items():
            scores = (np.asarray(r) + rng.normal(0, noise, 8)).tolist()
            rows.append({"retriever": name, "query_id": qid, "setting": "statement-full",
                         "failed": False, "scores": scores})  # fmt: skip
    runs = rescore_runs(pl.DataFrame(rows), rel, 10)
    return q, doc_ids, rel, runs


def test_identical_judge_keeps_tau_1_and_the_table_has_every_check():
    q, doc_ids, rel, runs = _bench_and_runs()
    same = relevance_with(q, doc_ids, pl.DataFrame(schema={"query_id": pl.String,
                          "candidate_id": pl.String, "rating": pl.Float64}))  # fmt: skip
    assert same == rel
    t = robustness_table(runs, rel, 10, 0, judge_relevance=same, splits=40)
    assert t["check"].to_list() == ["linear", "scale3", "ranks", "judge", "halves"]
    judge_row = t.filter(pl.col("check") == "judge").row(0, named=True)
    assert judge_row["tau"] == 1.0 and judge_row["flips"] == 0
    # new ratings for one query move its nDCG, and only its
    new = pl.DataFrame({"query_id": ["q0"] * 8, "candidate_id": doc_ids,
                        "rating": [5.0, 4, 3, 2, 1, 0, 0, 0]})  # fmt: skip
    moved = relevance_with(q, doc_ids, new)
    assert moved["q0"] == [5.0, 4, 3, 2, 1, 0, 0, 0] and moved["q1"] == rel["q1"]
    before = rescore_runs(runs, rel, 10)
    after = rescore_runs(runs, moved, 10)
    diff = before.join(after, on=["retriever", "query_id"]).filter(
        pl.col("ndcg") != pl.col("ndcg_right")
    )
    assert set(diff["query_id"]) == {"q0"}
    _, names, m = score_matrix(after, "statement-full")
    assert kendall_tau(m.mean(0), m.mean(0)) == 1.0 and names == ["bad", "good", "mid"]
