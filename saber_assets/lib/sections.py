"""The report's vocabulary, which every analysis and the study speak: a ``Section`` (a reading,
tables, figures), numbers and shares as text, and the section of an analysis that is one table.
``site/report.py`` renders sections into the page."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from saber_assets.config import PipelineConfig
from saber_assets.lib.figures import png_base64


@dataclass
class Section:
    title: str
    reading: str
    tables: list[tuple[str, pl.DataFrame]] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (caption, base64 PNG)


def pct(x: float | None, digits: int = 0) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def interval_text(low: str, high: str) -> pl.Expr:
    """ "[0.700, 0.812]" from two columns: three decimals always (a rounded float prints "0.7")."""

    def three(column: str) -> pl.Expr:
        return pl.col(column).map_elements(lambda v: f"{v:.3f}", return_dtype=pl.String)

    return pl.format("[{}, {}]", three(low), three(high))


def num(x) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.3f}" if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def agreement_parts(summary: pl.DataFrame, who: str, extra) -> tuple[pl.DataFrame, str]:
    """The agreement analyses' rows at every rank distance (Δr ≥ 0) and their reading: each
    ``who``'s agreement followed by ``extra(row)``."""
    base = summary.filter(pl.col("delta_r_at_least") == 0)
    parts = [
        f"{r[who].replace('_', ' ')} {num(r['agreement'])}{extra(r)}"
        for r in base.iter_rows(named=True)
    ]
    return base, "; ".join(parts)


def figures(table: pl.DataFrame, draw, caption: str) -> list[tuple[str, str]]:
    """A section's figure, drawn where its table has rows."""
    return [(caption, png_base64(draw(table)))] if table.height else []


def table_section(title: str, read, caption: str, draw=None, drawn: str = ""):
    """The section of an analysis that is one table: its reading, the table, and a figure
    (``draw``) where the table has rows."""

    def section(table: pl.DataFrame, cfg: PipelineConfig) -> Section:
        return Section(
            title, read(table), [(caption, table)], figures(table, draw, drawn) if draw else []
        )

    return section
