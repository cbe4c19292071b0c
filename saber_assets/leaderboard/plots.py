"""The leaderboard's figures (matplotlib, Agg): its bar chart and the paired tests' p-value heat
map."""

from __future__ import annotations

import numpy as np
import polars as pl

from saber_assets.leaderboard.board import CI_HIGH, CI_LOW, score_column
from saber_assets.leaderboard.significance import pvalue_matrix
from saber_assets.lib.figures import pyplot


def pvalue_heatmap(tests: pl.DataFrame, setting: str, column: str = "p_randomization_holm"):
    """Holm-corrected p-values of every pair of one setting (Overall), systems in the board's
    order; a cell below 0.05 is marked with the winner's side ("<" row wins, "^" column wins)."""
    plt = pyplot()

    part = tests.filter((pl.col("setting") == setting) & (pl.col("domain") == "Overall"))
    names = sorted(set(part["a"].to_list()) | set(part["b"].to_list()))
    m = pvalue_matrix(part, names, column)
    fig, ax = plt.subplots(figsize=(0.45 * len(names) + 3, 0.45 * len(names) + 2.2),
                           layout="constrained")  # fmt: skip
    im = ax.imshow(np.log10(np.clip(m, 1e-4, 1)), cmap="viridis_r", vmin=-4, vmax=0)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    better = {(a, b): w for a, b, w in part.select("a", "b", "better").iter_rows()}
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            w = better.get((a, b)) or better.get((b, a))
            if w is not None and i != j:
                ax.text(j, i, "<" if w == a else "^", ha="center", va="center", fontsize=7,
                        color="white")  # fmt: skip
    fig.colorbar(im, ax=ax, label="log10 p (Holm, paired randomization)")
    ax.set_title(f"{setting}: is the row better than the column?", fontsize=9)
    return fig


def board_chart(board: pl.DataFrame):
    """Every row's score with its 95% bootstrap interval, in the board's order."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(8, 0.35 * board.height + 1.2))
    labels = [f"{r} / {s}" for r, s in zip(board["retriever"], board["setting"], strict=True)]
    y = np.arange(board.height)
    m = score_column(board)
    ax.barh(
        y,
        board[m].to_numpy(),
        xerr=[board[m] - board[CI_LOW], board[CI_HIGH] - board[m]],
        color="#4c72b0",
    )
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"nDCG@{m.split('@')[1]} (exponential gain), 95% bootstrap CI")
    return fig
