"""How far the ratings and the leaderboard move between the two Bradley–Terry priors: the
reference's L2 (scikit-learn's LogisticRegression, C = 1, the default) and choix's (alpha = 0.1),
on a finished build's own judgments (no judge is asked again, no retriever runs again).

Per domain: Kendall τ of each query's candidate ordering (mean and minimum), the largest and the
mean |Δ rating|; per retriever and setting: nDCG@10 under each prior and the difference, and
Kendall τ between the two orderings of the retrievers (the leaderboard's own per-query matrix:
a query in two domains counts once).

    uv run python perf/bt_prior.py [--home .saber/sample]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.analyses.robustness import relevance_with
from saber_assets.benchmark.data import Benchmark
from saber_assets.config import data_home
from saber_assets.leaderboard.significance import kendall_tau, score_matrix
from saber_assets.ratings.bradley_terry import Prior
from saber_assets.ratings.rate import rate
from saber_assets.runs.evaluate import rescore_runs

PRIORS = {"l2": Prior("l2", c=1.0), "choix": Prior("choix", alpha=0.1)}
RUN_COLUMNS = ["query_id", "setting", "domains", "failed", "scores", "ndcg"]


def read_partitions(folder: Path) -> pl.DataFrame:
    return pl.read_parquet(folder / "*.parquet")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=data_home() / "sample")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    cands = read_partitions(args.home / "parquet" / "query_candidates")
    judgments = read_partitions(args.home / "parquet" / "tournament_judgments")
    judgments = judgments.unique(["query", "a", "b", "round"], keep="first")
    cols = ["domain", "query_id", "candidate_id", "position"]
    rated = {name: rate(cands.select(cols), judgments, p) for name, p in PRIORS.items()}
    both = rated["l2"].join(
        rated["choix"].select("query_id", "candidate_id", "rating"),
        on=["query_id", "candidate_id"],
        suffix="_choix",
    )
    rows = []
    for (domain,), d in both.group_by("domain", maintain_order=True):
        taus = [kendall_tau(g["rating"], g["rating_choix"]) for _, g in d.group_by("query_id")]
        delta = (d["rating"] - d["rating_choix"]).abs()
        rows.append((domain, len(taus), float(np.mean(taus)), float(np.min(taus)),
                     float(delta.max()), float(delta.mean())))  # fmt: skip
    table = pl.DataFrame(
        rows, schema=["domain", "queries", "tau_mean", "tau_min", "max_abs_d", "mean_abs_d"],
        orient="row",
    )  # fmt: skip
    print(f"{len(judgments)} judgments, {both.height} ratings\n")
    bench = Benchmark.read(args.home / "evaluation_benchmark")
    doc_ids = bench.documents["id"].to_list()
    runs = pl.concat(
        read_partitions(folder).select(RUN_COLUMNS).with_columns(pl.lit(folder.name).alias("retriever"))
        for folder in sorted((args.home / "runs").iterdir())
        if any(folder.glob("*.parquet"))
    )  # fmt: skip
    scored = {
        name: rescore_runs(runs, relevance_with(bench.queries, doc_ids, r), args.k)
        for name, r in rated.items()
    }
    out, orderings = [], []
    for setting in sorted(runs["setting"].unique().to_list()):
        _, names, l2 = score_matrix(scored["l2"], setting)
        _, _, choix = score_matrix(scored["choix"], setting)
        a, b = l2.mean(axis=0), choix.mean(axis=0)
        out += [(n, setting, x, y, x - y) for n, x, y in zip(names, a, b, strict=True)]
        orderings.append((setting, kendall_tau(a, b)))
    lb = pl.DataFrame(
        out, schema=["retriever", "setting", "ndcg", "ndcg_choix", "delta"], orient="row"
    )
    with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=200, float_precision=4):
        print(table.sort("domain"))
        print(lb.sort("setting", "ndcg", descending=[False, True]))
    print(f"\nmax |Δ nDCG@{args.k}|: {lb['delta'].abs().max():.4f}")
    for setting, tau in orderings:
        print(f"{setting}: Kendall τ of the retriever ordering {tau:.3f}")


if __name__ == "__main__":
    main()
