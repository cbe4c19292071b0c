"""The fill's placement against the tournament on a built benchmark's own ratings and judge
(``leaderboard/holes.py``): rated candidates are taken out of their query's scale, placed back by
``fill_holes`` with the build's judge, prompt and presentation, and their placed grades compared
with their tournament grades; beside them, the mean half-width of those grades' own 95% Laplace
intervals (the tournament's uncertainty, mapped by the query's min–max).

The scale a candidate is placed on is its query's other candidates at their fitted strengths: the
held-out candidate's own games stay in that fit (a refit without them moves the others by a few
hundredths), so the figure is the placement's error, not the fit's.

    uv run python perf/placement_agreement.py --config configs/sample.yaml --queries 40 --held 4
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl

from saber_assets.config import load_config
from saber_assets.definitions import llm_resource
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.fill_assets import hole_shown_first
from saber_assets.leaderboard.holes import fill_holes
from saber_assets.lib.tasks import prepared_judge
from saber_assets.outputs import Outputs
from saber_assets.pipeline import PipelineResource, stores_resource
from saber_assets.ratings.bradley_terry import information
from saber_assets.ratings.rate import configured_prior, pair_outcomes
from saber_resources.home import data_home


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="configs/sample.yaml")
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--held", type=int, default=4, help="candidates held out per query")
    ap.add_argument("--games", type=int, nargs="+", default=[4, 8, 16])
    args = ap.parse_args()
    cfg = load_config(args.config)
    home = data_home()
    out = Outputs.of(cfg, home)
    pipeline = PipelineResource(config_file=str(args.config), home=str(home))
    judge, text = prepared_judge(pipeline, llm_resource(cfg.llm, cfg.prompt_paths()),
                                 stores_resource(cfg, home), pl.read_parquet(out.parquet / "corpus.parquet"))  # fmt: skip
    parts = {
        p.stem: pl.read_parquet(p) for p in (out.parquet / "relevance_ratings").glob("*.parquet")
    }
    ratings = concat_partitions(parts).unique(["query_id", "candidate_id"])
    judged = concat_partitions({p.stem: pl.read_parquet(p) for p in
                                (out.parquet / "tournament_judgments").glob("*.parquet")})  # fmt: skip
    prior, rng = configured_prior(cfg), np.random.default_rng(cfg.seed)
    queries = sorted(ratings["query_id"].unique().to_list())
    queries = [queries[i] for i in sorted(rng.choice(len(queries), min(args.queries, len(queries)),
                                                     replace=False))]  # fmt: skip
    calls = {"games": 0, "seconds": 0.0}

    def play(asked):
        items, first = [], []
        for q, d, o in asked:
            f = hole_shown_first(cfg.seed, q, d, o)
            first.append(f)
            items.append((text[q], *((text[d], text[o]) if f else (text[o], text[d]))))
        t0 = time.perf_counter()
        answers = judge.compare_batch(items)
        calls["games"] += len(items)
        calls["seconds"] += time.perf_counter() - t0
        return [None if not a.ok else float((a.value == 1) == f)
                for a, f in zip(answers, first, strict=True)]  # fmt: skip

    errors = {g: [] for g in args.games}
    half_widths = []
    for q in queries:
        mine = ratings.filter(pl.col("query_id") == q).sort("candidate_id")
        cands, s = mine["candidate_id"].to_list(), mine["strength"].to_numpy()
        games = judged.filter(pl.col("query") == q)
        wins, ties = pair_outcomes(games, cands, cfg.tournament.both_orders)
        cov = np.linalg.inv(information(len(cands), wins, s, prior, ties))
        span = float(s.max() - s.min())
        held = sorted(
            rng.choice(len(cands), min(args.held, len(cands) - 2), replace=False).tolist()
        )
        half_widths += (1.96 * np.sqrt(np.diag(cov)[held]) * 5 / span).tolist()
        others = mine.filter(~pl.int_range(pl.len()).is_in(held))
        for h in held:
            holes = pl.DataFrame({"query_id": [q], "document_id": [cands[h]],
                                  "pooled_by": [["held-out"]]})  # fmt: skip
            for g in args.games:
                placed = fill_holes(holes, others, play, g, prior)
                if placed["grade"][0] is not None:
                    errors[g].append(abs(placed["grade"][0] - mine["rating"][h]))
    half = float(np.mean(half_widths))
    print(f"{args.config}: {len(queries)} queries, {len(half_widths)} held-out candidates; "
          f"judge {calls['games']:,} games in {calls['seconds']:.1f} s")  # fmt: skip
    print(f"tournament grades' mean 95% half-width: {half:.3f}")
    for g in args.games:
        mae = float(np.mean(errors[g]))
        print(
            f"  {g:>2} games: mean |placed − tournament| {mae:.3f}  ({mae / half:.2f} of the "
            f"half-width; {len(errors[g])} placed)"
        )


if __name__ == "__main__":
    main()
