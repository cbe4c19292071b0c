"""What the benchmark is made of: queries and documents by domain and sub-domain (first and
second tree levels), by source, and the candidate groups' sizes."""

from __future__ import annotations

import numpy as np
import polars as pl

from saber_assets.lib.figures import pyplot
from saber_resources.titles import humanize_title

SEP = " › "


def source_of(ids: pl.Expr) -> pl.Expr:
    """Problem ids are ``source:native_id``."""
    return ids.str.split(":").list.first()


def subdomains(tree: pl.DataFrame) -> pl.DataFrame:
    """Tree node -> its domain (spelt as the benchmark spells it: the ontology's domain name,
    else its first-level title made readable, "NumberTheory" -> "Number Theory") and its
    second-level (sub-domain) title, made readable too, from the node's root path."""
    parts = pl.col("path").str.split(SEP)
    readable = lambda e: e.map_elements(humanize_title, return_dtype=pl.String)  # noqa: E731
    level1 = readable(parts.list.get(1, null_on_oob=True))
    if "domain" in tree.columns:
        level1 = pl.coalesce(pl.col("domain"), level1)
    return tree.select(
        "node",
        level1.alias("level1"),
        readable(parts.list.get(2, null_on_oob=True)).alias("level2"),
    )


def shares(frame: pl.DataFrame, by: list[str], total: int, what: str) -> pl.DataFrame:
    return (
        frame.group_by(by)
        .agg(pl.col("id").n_unique().alias("count"))
        .with_columns((pl.col("count") / max(total, 1)).round(4).alias("share"))
        .with_columns(pl.lit(what).alias("of"))
        .sort(["count", *by], descending=[True, *[False] * len(by)])
    )


def composition(
    queries: pl.DataFrame,
    documents: pl.DataFrame,
    annotations: pl.DataFrame,
    tree: pl.DataFrame,
    ratings: pl.DataFrame,
) -> dict[str, pl.DataFrame]:
    """Tables: ``domains`` (of, level1, level2, count, share: a problem counts once in each
    sub-domain it is annotated with, so shares may sum past 1), ``level1`` (of, level1, count,
    share: distinct problems per first-level domain, each once per domain it is in),
    ``sources`` (of, source, count, share) and ``groups`` (group, candidates, per_query)."""
    topics = (
        annotations.select("id", "topics")
        .explode("topics")
        .drop_nulls("topics")
        .join(subdomains(tree), left_on="topics", right_on="node", how="inner")
        .unique(["id", "level1", "level2"])
    )
    parts_d, parts_1, parts_s = [], [], []
    for what, frame in (("queries", queries), ("documents", documents)):
        ids = frame.select("id")
        tagged = ids.join(topics, on="id")
        parts_1.append(
            shares(tagged, ["level1"], ids.height, what).select("of", "level1", "count", "share")
        )
        parts_d.append(
            shares(tagged, ["level1", "level2"], ids.height, what).select(
                "of", "level1", "level2", "count", "share"
            )
        )
        parts_s.append(
            shares(
                ids.with_columns(source_of(pl.col("id")).alias("source")),
                ["source"],
                ids.height,
                what,
            ).select("of", "source", "count", "share")
        )
    n_queries = max(ratings.select(pl.struct("domain", "query_id").n_unique()).item(), 1)
    groups = (
        ratings.group_by("group")
        .agg(pl.len().alias("candidates"))
        .with_columns((pl.col("candidates") / n_queries).round(2).alias("per_query"))
        .sort("group")
    )
    return {"domains": pl.concat(parts_d), "level1": pl.concat(parts_1),
            "sources": pl.concat(parts_s), "groups": groups}  # fmt: skip


def shares_figure(tables: dict[str, pl.DataFrame]):
    """Queries and documents by domain (bars with shares), and the sources' shares."""
    # at use: pyplot is 0.25 s of every process that loads the definitions (the asset modules
    # that draw set the Agg backend)
    plt = pyplot()

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
