"""The analyses' figures (matplotlib, Agg): shown as asset metadata and in the HTML report."""

from __future__ import annotations

import matplotlib
import numpy as np
import polars as pl

from saber_assets.leaderboard.board import CI_HIGH, CI_LOW, score_column

matplotlib.use("Agg")


def shares_figure(tables: dict[str, pl.DataFrame]):
    import matplotlib.pyplot as plt

    # bars, not pies: a pie's labels overlapped wherever a domain's slice was thin
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), layout="constrained")
    for ax, what in zip(axes[:2], ("queries", "documents"), strict=True):
        frame = (
            tables["domains"]
            .filter(pl.col("of") == what)
            .group_by("level1")
            .agg(pl.col("count").sum())
            .sort("count")
        )
        total = max(int(frame["count"].sum()), 1)
        y = np.arange(frame.height)
        ax.barh(y, frame["count"].to_numpy(), color="C0")
        ax.set_yticks(y, [str(x) for x in frame["level1"]], fontsize=8)
        for k, c in enumerate(frame["count"]):
            ax.text(c, k, f" {100 * c / total:.0f}%", va="center", fontsize=7)
        ax.set_title(f"{what} by domain (topic assignments)", fontsize=9)
    src = tables["sources"]
    for k, what in enumerate(("queries", "documents")):
        part = src.filter(pl.col("of") == what)
        axes[2].bar([f"{s}\n{what}" for s in part["source"]], part["share"], color=f"C{k}")
    axes[2].set_ylabel("share")
    axes[2].set_title("sources")
    axes[2].tick_params(axis="x", labelsize=7)
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
        err = np.vstack([mid - part[CI_LOW].to_numpy(), part[CI_HIGH].to_numpy() - mid])
        ax.errorbar(mid, y, xerr=err, fmt="o", ms=4, capsize=2)
        labels = part["retriever"].to_list()
        if "rank_ci" in part.columns:  # the rank's 95% interval beside each name
            labels = [f"{n}  [rank {r}]" for n, r in zip(labels, part["rank_ci"], strict=True)]
        ax.set_yticks(y, labels, fontsize=7)
        ax.set_xlabel("nDCG@10 (95% CI)")
        ax.set_title(setting, fontsize=9)
    return fig
