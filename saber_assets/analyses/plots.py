"""The analyses' figures (matplotlib, Agg): shown as asset metadata and in the HTML report."""

from __future__ import annotations

import matplotlib
import numpy as np
import polars as pl

from saber_assets.analyses.convergence import POLICIES
from saber_assets.analyses.signal_groups import GROUPS
from saber_assets.leaderboard.metrics import score_column

matplotlib.use("Agg")


def curves_figure(curves: pl.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for group in GROUPS:
        line = curves.filter((pl.col("scope") == "all") & (pl.col("group") == group))
        ax.plot(line["r"], line["fraction"], label=group.replace("_", " "))
    ax.set_xlabel("rank r of the final ratings")
    ax.set_ylabel("fraction of the group within the top r")
    ax.set_title("signal groups, all queries")
    ax.legend()
    return fig


def shares_figure(tables: dict[str, pl.DataFrame]):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, what in zip(axes[:2], ("queries", "documents"), strict=True):
        frame = (
            tables["domains"]
            .filter(pl.col("of") == what)
            .group_by("level1")
            .agg(pl.col("count").sum())
            .sort("count", descending=True)
        )
        ax.pie(frame["count"], labels=frame["level1"], autopct="%1.0f%%", textprops={"size": 7})
        ax.set_title(f"{what} by domain (topic assignments)")
    src = tables["sources"]
    for k, what in enumerate(("queries", "documents")):
        part = src.filter(pl.col("of") == what)
        axes[2].bar([f"{s}\n{what}" for s in part["source"]], part["share"], color=f"C{k}")
    axes[2].set_ylabel("share")
    axes[2].set_title("sources")
    axes[2].tick_params(axis="x", labelsize=7)
    return fig


def mteb_figure(matched: pl.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    metric = score_column(matched)
    for k, ((setting,), part) in enumerate(matched.group_by("setting", maintain_order=True)):
        ax.scatter(part["mteb"], part[metric], label=setting, color=f"C{k}")
        for m, x, y in part.select("model", "mteb", metric).iter_rows():
            ax.annotate(m, (x, y), fontsize=6)
    ax.set_xlabel("MTEB retrieval score")
    ax.set_ylabel(f"nDCG@{metric.split('@')[1]} on this benchmark")
    ax.legend(fontsize=7)
    return fig


def regimes_figure(summary: pl.DataFrame):
    import matplotlib.pyplot as plt

    regimes = list(dict.fromkeys(summary["regime"]))
    buckets = sorted(set(summary["delta_r_at_least"]))
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(len(regimes), 1)
    for k, regime in enumerate(regimes):
        got = dict(
            summary.filter(pl.col("regime") == regime)
            .select("delta_r_at_least", "agreement")
            .iter_rows()
        )
        ax.bar(
            np.arange(len(buckets)) + k * width,
            [got.get(b) or 0 for b in buckets],
            width,
            label=regime.replace("_", " "),
        )
    ax.set_xticks(np.arange(len(buckets)) + 0.4 - width / 2, [f"Δr ≥ {b}" for b in buckets])
    ax.set_ylim(0, 1)
    ax.set_ylabel("agreement with the BT ranking")
    ax.legend(fontsize=7)
    return fig


def convergence_figure(mean: pl.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in POLICIES:
        line = mean.filter(pl.col("policy") == policy).sort("calls")
        ax.plot(line["calls"], line["share"], marker="o", ms=3, label=policy)
    ax.set_xlabel("judge calls per query")
    ax.set_ylabel("inversions vs the exhaustive ranking (share of pairs)")
    ax.legend()
    return fig


def wins_figure(summary: pl.DataFrame):
    import matplotlib.pyplot as plt

    part = summary.filter(pl.col("setting") == summary["setting"].min())
    names = sorted(part["retriever"].unique().to_list())
    domains = sorted(part["domain"].unique().to_list())
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(domains) + 2), 4))
    width = 0.8 / max(len(names), 1)
    for k, name in enumerate(names):
        got = dict(
            part.filter(pl.col("retriever") == name).select("domain", "math_wins_pct").iter_rows()
        )
        ax.bar(
            np.arange(len(domains)) + k * width,
            [got.get(d) or 0 for d in domains],
            width,
            label=name,
        )
    ax.set_xticks(np.arange(len(domains)) + 0.4 - width / 2, domains, fontsize=7)
    ax.axhline(50, color="grey", lw=0.8, ls=":")
    ax.set_ylabel("% of queries where math-only wins")
    ax.set_title(part["setting"][0] if part.height else "")
    ax.legend(fontsize=6, ncol=2)
    return fig


def leaderboard_figure(board: pl.DataFrame):
    """nDCG@10 with its 95% CI per retriever, one panel per setting."""
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(board["setting"]))
    fig, axes = plt.subplots(
        1,
        len(settings),
        figsize=(4.8 * len(settings), 0.3 * board["retriever"].n_unique() + 1.5),
        layout="constrained",
    )
    axes = np.atleast_1d(axes)
    for ax, setting in zip(axes, settings, strict=True):
        part = board.filter(pl.col("setting") == setting).sort(score_column(board))
        y = np.arange(part.height)
        mid = part[score_column(board)].to_numpy()
        err = np.vstack([mid - part["ci_low"].to_numpy(), part["ci_high"].to_numpy() - mid])
        ax.errorbar(mid, y, xerr=err, fmt="o", ms=4, capsize=2)
        labels = part["retriever"].to_list()
        if "rank_ci" in part.columns:  # the rank's 95% interval beside each name
            labels = [f"{n}  [rank {r}]" for n, r in zip(labels, part["rank_ci"], strict=True)]
        ax.set_yticks(y, labels, fontsize=7)
        ax.set_xlabel("nDCG@10 (95% CI)")
        ax.set_title(setting, fontsize=9)
    return fig


def robustness_figure(table: pl.DataFrame):
    """Kendall τ to the leaderboard's ordering, per check and setting."""
    import matplotlib.pyplot as plt

    checks = list(dict.fromkeys(table["check"]))
    settings = list(dict.fromkeys(table["setting"]))
    fig, ax = plt.subplots(figsize=(1.3 * len(checks) + 2, 3.6), layout="constrained")
    width = 0.8 / max(len(settings), 1)
    for k, setting in enumerate(settings):
        part = table.filter(pl.col("setting") == setting)
        tau = {c: t for c, t in part.select("check", "tau").iter_rows()}
        x = np.arange(len(checks)) + k * width
        ax.bar(x, [tau.get(c, np.nan) for c in checks], width, label=setting)
    ax.set_xticks(np.arange(len(checks)) + width * (len(settings) - 1) / 2, checks)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_ylim(min(0.0, float(table["tau"].min()) - 0.05), 1.05)
    ax.set_ylabel("Kendall τ to the leaderboard")
    ax.set_title("robustness of the system ordering", fontsize=9)
    ax.legend(fontsize=7)
    return fig
