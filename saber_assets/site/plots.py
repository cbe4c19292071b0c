"""The report's own figures (matplotlib, Agg): the leaderboard's intervals per setting."""

from __future__ import annotations

import numpy as np
import polars as pl

from saber_assets.leaderboard.board import CI_HIGH, CI_LOW, score_column
from saber_assets.lib.figures import pyplot


def leaderboard_figure(board: pl.DataFrame):
    """nDCG@10 with its 95% CI per retriever, one panel per setting."""
    plt = pyplot()

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
