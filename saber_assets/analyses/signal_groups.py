"""Which signal finds the relevant candidates: for each candidate group (topic-only,
summary-only, both), the cumulative fraction of its candidates within the top r of the final
ratings, r = 1 … candidates per query, over all queries and per domain (the paper's Figure on
signal groups)."""

from __future__ import annotations

import numpy as np
import polars as pl

from saber_assets.config import PipelineConfig
from saber_assets.lib import sections
from saber_assets.lib.figures import png_base64, pyplot

GROUPS = ("topic_only", "summary_only", "both")


def rank_within_query(ratings: pl.DataFrame) -> pl.DataFrame:
    """Rank 1 = highest rating in its (domain, query); ties broken by candidate id (stable)."""
    return ratings.sort(
        ["domain", "query_id", "rating", "candidate_id"], descending=[False, False, True, False]
    ).with_columns(pl.int_range(1, pl.len() + 1).over("domain", "query_id").alias("rank"))


def group_curves(ratings: pl.DataFrame) -> pl.DataFrame:
    """Rows (scope, group, r, fraction): scope is "all" or a domain; fraction = share of the
    group's candidates (over the scope's queries) ranked within the top r."""
    schema = {"scope": pl.String, "group": pl.String, "r": pl.Int64, "fraction": pl.Float64}
    if ratings.height == 0:
        return pl.DataFrame(schema=schema)
    ranked = rank_within_query(ratings)
    depth = int(ranked["rank"].max())
    scopes = [("all", ranked)] + [
        (d, f) for (d,), f in ranked.group_by("domain", maintain_order=True)
    ]
    rows = []
    for scope, frame in scopes:
        for group in GROUPS:
            ranks = frame.filter(pl.col("group") == group)["rank"].to_numpy()
            if len(ranks) == 0:
                continue
            frac = np.cumsum(np.bincount(ranks, minlength=depth + 1)[1:]) / len(ranks)
            rows += [(scope, group, r + 1, float(f)) for r, f in enumerate(frac)]
    return pl.DataFrame(rows, schema=schema, orient="row")


def area_under(curves: pl.DataFrame) -> pl.DataFrame:
    """One number per (scope, group): the mean of its curve (1 = all its candidates on top)."""
    return (
        curves.group_by("scope", "group", maintain_order=True)
        .agg(pl.col("fraction").mean().round(4).alias("area"))
        .pivot(on="group", index="scope", values="area")
    )


# ---- its section of the report


def curves_figure(curves: pl.DataFrame):
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for group in GROUPS:
        line = curves.filter((pl.col("scope") == "all") & (pl.col("group") == group))
        ax.plot(line["r"], line["fraction"], label=group.replace("_", " "))
    ax.set_xlabel("rank r of the final ratings")
    ax.set_ylabel("fraction of the group within the top r")
    ax.set_title("signal groups, all queries")
    ax.legend()
    return fig


def read_signal_groups(areas: pl.DataFrame) -> str:
    """``areas``: ``area_under``'s table (scope, then one column per group)."""
    part = areas.filter(pl.col("scope") == "all")
    if not part.height:
        return "No ratings to read."
    got = sorted(
        ((g, part[g][0]) for g in part.columns if g != "scope" and part[g][0] is not None),
        key=lambda x: -x[1],
    )
    ranked = ", ".join(f"{g.replace('_', '-')} {a:.3f}" for g, a in got)
    return (
        f"Mean of each group's curve (1 = the group fills the top ranks first): {ranked}. The "
        f"{got[0][0].replace('_', '-')} candidates rise highest in the final ratings; a group "
        "with a low value was mostly judged less relevant than the others."
    )


def signal_groups_section(curves: pl.DataFrame, cfg: PipelineConfig) -> sections.Section:
    areas = area_under(curves)
    return sections.Section(
        "Signal-group curves",
        read_signal_groups(areas),
        [("mean of each curve, per scope", areas)],
        [("cumulative share of each group", png_base64(curves_figure(curves)))],
    )
