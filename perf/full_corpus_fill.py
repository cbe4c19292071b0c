"""The full-corpus fill's non-LLM work at the 70K rehearsal's size (``leaderboard/holes.py``):
pooling each system's top 10 into holes, placing every hole on its query's scale (the judge a
free stand-in: its games are the LLM's work, not measured here), and the board before and
after with its intervals and Zobel's leave-one-out. Beside it, as the baseline in the same run,
what the runs stage spends on the same top 10s: ``top_ids`` over every query's corpus scores.

    uv run python perf/full_corpus_fill.py --docs 70000 --queries 1000 --systems 25
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import polars as pl

from saber_assets.leaderboard.holes import fill_board, fill_holes, pooled_holes
from saber_assets.ratings.bradley_terry import Prior
from saber_assets.runs.metrics import top_ids


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=70_000)
    ap.add_argument("--queries", type=int, default=1_000)
    ap.add_argument("--systems", type=int, default=25)
    ap.add_argument("--settings", type=int, default=3)
    ap.add_argument("--candidates", type=int, default=150)
    ap.add_argument("--games", type=int, default=8)
    ap.add_argument("--hole-pool", type=int, default=300)  # per query: others systems may rank
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    doc_ids = [f"d{i}" for i in range(args.docs)]
    cands = {
        f"q{q}": rng.choice(args.docs, args.candidates, replace=False) for q in range(args.queries)
    }
    strengths = {q: rng.normal(0, 1.5, args.candidates) for q in cands}
    ratings = pl.DataFrame({
        "query_id": [q for q in cands for _ in range(args.candidates)],
        "candidate_id": [doc_ids[c] for q in cands for c in cands[q]],
        "strength": np.concatenate([strengths[q] for q in cands]),
    })  # fmt: skip
    base = {q: {doc_ids[c]: float(5 * (s - s.min()) / (s.max() - s.min()))
                for c, s in zip(cands[q], strengths[q], strict=True)} for q in cands}  # fmt: skip
    # the baseline: the runs stage's top 10 per (system, setting, query) from corpus scores
    t0 = time.perf_counter()
    rows = []
    # each query's likely documents: its candidates and a few hundred others every system may
    # rank high (so systems share holes, as real ones do)
    likely = {q: np.r_[cands[q], rng.choice(args.docs, args.hole_pool, replace=False)]
              for q in cands}  # fmt: skip
    for s in range(args.systems):
        for setting in range(args.settings):
            for q in cands:
                scores = rng.random(args.docs)
                scores[likely[q]] += 1.0 + rng.random(len(likely[q]))  # these rank first
                rows.append((f"sys{s}", f"set{setting}", q, top_ids(scores, doc_ids, 10)))
    runs_s = time.perf_counter() - t0
    runs = pl.DataFrame(rows, schema=["retriever", "setting", "query_id", "full_top"], orient="row")
    t0 = time.perf_counter()
    holes = pooled_holes(runs, {q: set(g) for q, g in base.items()}, 10)
    pool_s = time.perf_counter() - t0

    def judge(asked):  # a free stand-in: the LLM's games are not this script's to time
        return [float(rng.random() < 0.5) for _ in asked]

    t0 = time.perf_counter()
    fills = fill_holes(holes, ratings, judge, args.games, Prior())
    place_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    board, taus = fill_board(runs, base, fills, 10, 1000, 0)
    board_s = time.perf_counter() - t0
    fill_s = pool_s + place_s + board_s
    print(
        f"{args.queries} queries, {args.systems} systems x {args.settings} settings, "
        f"{args.docs:,} documents: {holes.height:,} holes, {holes.height * args.games:,} games"
    )
    print(f"  baseline (top 10 from corpus scores, the runs stage's share): {runs_s:.1f} s")
    print(
        f"  fill: pooling {pool_s:.1f} s, placement {place_s:.1f} s, board {board_s:.1f} s "
        f"= {fill_s:.1f} s ({fill_s / runs_s:.0%} of the baseline)"
    )
    print(
        f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; "
        f"tau before/after per setting: {taus}"
    )


if __name__ == "__main__":
    main()
