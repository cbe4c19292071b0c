"""A board's scores from runs: one row per setting, overall and per domain, with bootstrap
intervals, failures, the full-corpus track's columns and latency. The board and ``saber
evaluate`` both make their tables here (``rows.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from saber_assets.leaderboard import board as col
from saber_assets.leaderboard.board import metric_column
from saber_assets.runs.evaluate import skipped
from saber_assets.runs.metrics import summarize


def score_table(
    runs: pl.DataFrame,
    domains: Sequence[str],
    resamples: int = 1000,
    seed: int = 0,
    k: int = 10,
) -> pl.DataFrame:
    """One row per setting: overall and per-domain mean nDCG with bootstrap CIs, failures, latency;
    the score columns are named for the runs' cut-off ``k`` (``ndcg@k``).
    Failed queries count as nDCG 0 in the means and are reported in ``failed``, under either
    protocol (the reference evaluation scores an engine failure as all zeros, still ranked). A
    query the retriever skipped by its own rule (``skipped``: the reference's md5 list) is left
    out of the means and counted in ``skipped`` (among ``failed`` too)."""
    out = []
    # one row per (query, setting) (a multi-domain query runs in several domain partitions) in a
    # fixed query order, so the seeded bootstrap gives the same CI wherever it is computed
    unique = runs.unique(["query_id", "setting"], keep="first").sort("setting", "query_id")
    for (setting,), frame in unique.group_by("setting", maintain_order=True):
        n_failed = int(frame["failed"].sum())
        left_out = skipped(frame)
        n_skipped = int(frame.select(left_out.sum()).item())
        # unfiltered when nothing is skipped: the same sums, to the last bit
        scored = frame.filter(~left_out) if n_skipped else frame
        summ = summarize(
            scored["ndcg"].to_list(), scored["domains"].to_list(), domains, resamples, seed
        )
        row = {col.SETTING: setting, col.QUERIES: frame.height, col.FAILED: n_failed}
        row[col.SKIPPED] = n_skipped
        if "doc_failures" in frame.columns:
            row["doc_failures"] = int(frame["doc_failures"].fill_null(0).sum())
        row |= {
            metric_column(k): summ["overall"]["mean"],
            col.CI_LOW: summ["overall"]["low"],
            col.CI_HIGH: summ["overall"]["high"],
        }
        for d in domains:
            row[col.domain_mean(d)] = summ[d]["mean"]
            row[col.domain_queries(d)] = summ[d]["queries"]  # what the cell averages
            row[col.domain_ci(d)] = (
                f"[{summ[d]['low']:.3f}, {summ[d]['high']:.3f}]" if summ[d]["queries"] else ""
            )
        row[f"{metric_column(k)}_linear"] = float(scored["ndcg_linear"].mean())
        row[f"full_ndcg'@{k}"] = frame["full_ndcg_prime"].mean()
        # the holes before any fill: how much of the top k is graded, and nDCG with holes as 0
        row[f"judged@{k}"] = frame["full_judged"].mean() if "full_judged" in frame.columns else None
        row[f"full_ndcg@{k}"] = (
            frame["full_ndcg_zero"].mean() if "full_ndcg_zero" in frame.columns else None
        )
        row["full_recall_top5@100"] = frame["full_recall_top5_at100"].mean()
        row["median_latency_ms"] = frame["latency_ms"].median()
        out.append(row)
    if not out:
        return col.empty_table(k)
    return pl.DataFrame(out)
