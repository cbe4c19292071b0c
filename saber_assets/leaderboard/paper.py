"""Our numbers beside the SABER-Math paper's, and the reference evaluation's protocol.

The paper's nDCG@10 figures (``data/reference/saber_math_paper_ndcg10.csv``, transcribed from its
LaTeX source with the line of each figure) come in three tables: ``main`` (Table 1),
``ci`` (the appendix's 95% intervals, statement→full) and ``additional`` (the two other
settings per domain). The paper disagrees with itself in 28 cells; a system whose figures differ
between two tables is known only to within that difference, and the comparison says so.

The reference evaluation differs from saber's default scoring in two ways (``protocol``):
- a failed query is left out of the mean (saber counts it as 0 and reports it);
- tied scores are ordered as ``numpy.argsort(-scores)`` orders them (saber takes the expected
  DCG over the orders of each tie group, which no candidate order can change).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import polars as pl

from saber_assets.config import REPO_ROOT
from saber_assets.leaderboard.board import score_column
from saber_assets.runs.evaluate import with_ties

PAPER_CSV = REPO_ROOT / "data" / "reference" / "saber_math_paper_ndcg10.csv"
TABLES = ("main", "ci", "additional")
# The appendix's per-domain intervals came from 300 queries drawn per domain, more than a domain
# holds (about 200-254): drawn with replacement beyond the domain's size, they are too narrow,
# and a figure outside one is no finding. Overall's (1,000 queries) stands.
DOMAIN_CI_NOTE = (
    "the paper's domain interval is too narrow (300 queries drawn, the domain holds ~200-254)"
)
PROTOCOLS = ("saber", "reference")
OVERALL = "Overall"


def paper_figures(path=PAPER_CSV) -> pl.DataFrame:
    """Every published figure: table, setting, system, domain, ndcg10, ci_plus, ci_minus, line."""
    return pl.read_csv(
        path,
        schema_overrides={"ndcg10": pl.Float64, "ci_plus": pl.Float64, "ci_minus": pl.Float64},
    )


def disagreements(figures: pl.DataFrame) -> pl.DataFrame:
    """The cells (system, setting, domain) whose published figures differ between tables, with
    the spread: those systems are known only to within it."""
    return (
        figures.group_by("system", "setting", "domain")
        .agg(
            pl.col("ndcg10").min().alias("low"),
            pl.col("ndcg10").max().alias("high"),
            pl.col("table").unique().sort().str.join("/").alias("tables"),
        )
        .filter(pl.col("high") > pl.col("low"))
        .with_columns((pl.col("high") - pl.col("low")).round(6).alias("spread"))
        .sort("system", "setting", "domain")
    )


def domain_key(name: str) -> str:
    """Domains compared by letters alone: "NumberTheory" (MathWorld's id) is "Number Theory"."""
    return re.sub(r"[^a-z]", "", name.lower())


def compare(ours: pl.DataFrame, figures: pl.DataFrame, table: str = "main") -> pl.DataFrame:
    """``ours`` (system, setting, domain, ours) beside one table of the paper: the paper's figure,
    the difference, whether ours lies in the paper's 95% interval (where that table has one) and
    the cells whose published figures disagree (flagged, never matched silently to one)."""
    if table not in TABLES:
        raise ValueError(f"--table must be one of {', '.join(TABLES)}, not {table!r}")
    paper = figures.filter(pl.col("table") == table).with_columns(
        pl.col("domain").map_elements(domain_key, return_dtype=pl.String).alias("key")
    )
    spread = disagreements(figures).select(
        "system", "setting", "domain", pl.col("spread"), pl.col("low"), pl.col("high")
    )
    mine = ours.with_columns(
        pl.col("domain").map_elements(domain_key, return_dtype=pl.String).alias("key")
    )
    out = mine.join(
        paper.select(
            "system",
            "setting",
            "key",
            pl.col("domain").alias("paper_domain"),
            "ndcg10",
            "ci_plus",
            "ci_minus",
        ),  # fmt: skip
        on=["system", "setting", "key"],
        how="left",
    )
    out = out.join(
        spread.rename({"domain": "paper_domain"}), on=["system", "setting", "paper_domain"],
        how="left",
    )  # fmt: skip
    inside = (
        pl.when(pl.col("ci_plus").is_null())
        .then(None)
        .otherwise(
            (pl.col("ours") >= pl.col("ndcg10") - pl.col("ci_minus"))
            & (pl.col("ours") <= pl.col("ndcg10") + pl.col("ci_plus"))
        )
    )
    flag = (
        pl.when(pl.col("spread").is_not_null())
        .then(
            pl.format(
                "paper disagrees with itself: {}–{}",
                pl.col("low").round(3),
                pl.col("high").round(3),
            )
        )
        .when(pl.col("ndcg10").is_null())
        .then(pl.lit("not in this table"))
        .otherwise(pl.lit(""))
    )
    if table == "ci":
        narrow = pl.col("ci_plus").is_not_null() & (pl.col("key") != domain_key("Overall"))
        flag = (
            pl.when(narrow & (flag == ""))
            .then(pl.lit(DOMAIN_CI_NOTE))
            .when(narrow)
            .then(pl.concat_str(flag, pl.lit("; " + DOMAIN_CI_NOTE)))
            .otherwise(flag)
        )
    return out.select(
        "system",
        "setting",
        "domain",
        "ours",
        pl.col("ndcg10").alias("paper"),
        (pl.col("ours") - pl.col("ndcg10")).alias("diff"),
        inside.alias("in_paper_ci"),
        flag.alias("flag"),
    )


def apply_protocol(runs: pl.DataFrame, relevance: dict[str, list[float]], k: int, protocol: str):
    """``runs`` scored under ``protocol``: ``saber`` leaves them as they are; ``reference``
    recomputes each query's nDCG from its stored candidate scores with ties in numpy's order, a
    failed query scoring 0 as the reference scores an engine failure (all zeros, still ranked;
    a query on the skip list is left out of the means by ``score_table``, under both)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
    return runs if protocol == "saber" else with_ties(runs, relevance, k, "order")


def domain_cells(report: pl.DataFrame, system: str, domains: Sequence[str]) -> pl.DataFrame:
    """A report's rows (one per setting) as system, setting, domain, ours: Overall and each domain."""
    rows, m = [], score_column(report)
    for r in report.iter_rows(named=True):
        rows.append((system, r["setting"], OVERALL, r[m]))
        rows.extend((system, r["setting"], d, r.get(d)) for d in domains)
    return pl.DataFrame(
        rows, schema={"system": pl.String, "setting": pl.String, "domain": pl.String,
                      "ours": pl.Float64}, orient="row",
    ).with_columns(pl.col("ours").fill_nan(None))  # fmt: skip


def is_published(manifest: dict) -> bool:
    """Whether a benchmark is the published SABER-Math (read by ``saber pull`` from its repos)."""
    return manifest.get("name") == "sabermath" and manifest.get("source") == "huggingface-datasets"


def fmt(value, signed: bool = False) -> str:
    """A cell of the printed comparison: three decimals, "—" for nothing, yes/no for a test."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:+.3f}" if signed else f"{value:.3f}"
    return str(value)
