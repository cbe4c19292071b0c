"""The benchmark report: one self-contained HTML file (inline PNG, inline CSS, no script, no
network) with the composition, thresholds, candidates, tournament statistics, the leaderboard with
CIs and every analysis, each with a paragraph read off its own numbers.

Pure: the asset gathers the tables and figures; the readings here are tested on known inputs.
"""

from __future__ import annotations

import html

import polars as pl

from saber_assets.leaderboard.board import (
    CI_HIGH,
    CI_HIGH_JOINT,
    CI_LOW,
    CI_LOW_JOINT,
    score_column,
)
from saber_assets.leaderboard.joint import share_text
from saber_assets.lib.sections import Section, num, pct
from saber_assets.tournament.engine import order_consistency, position_bias

# ------------------------------------------------------------------------------ statistics


def tournament_stats(judgments: pl.DataFrame) -> pl.DataFrame:
    """Per domain and over all: judgments, failures, and the share of decided judgments won by
    the candidate shown first with its 95% Wilson interval (position bias)."""
    rows = []
    groups = [("all", judgments)] + [
        (d, part) for (d,), part in judgments.sort("domain").group_by("domain", maintain_order=True)
    ]
    for domain, part in groups:
        bias = position_bias(part)
        agree, checked, _, _ = order_consistency(part)
        rows.append(
            {
                "domain": domain,
                "queries": part["query"].n_unique(),
                "judgments": part.height,
                "failures": part.height - bias.decided,
                "first_shown_wins": bias.share,
                "first_shown_low": bias.low,  # its Wilson interval
                "first_shown_high": bias.high,
                "order_checked": checked,  # pairs judged again in the other order
                "order_consistency": agree / checked if checked else None,
            }
        )
    return pl.DataFrame(rows)


# -------------------------------------------------------------------------------- readings


def read_composition(corpus: pl.DataFrame, tables: dict[str, pl.DataFrame]) -> str:
    """The corpus's sources, and the domains by queries: how many distinct queries each
    first-level domain holds (``composition``'s ``level1``), not its sub-domains' hits added."""
    src = corpus.group_by("source").len().sort("len", descending=True)
    top = src.row(0) if src.height else ("none", 0)
    q = (
        tables["level1"]
        .filter(pl.col("of") == "queries")
        .sort(["count", "level1"], descending=[True, False])
    )
    text = (
        f"The corpus holds {corpus.height:,} problems from {src.height} source(s); the largest, "
        f"{top[0]}, gives {pct(top[1] / max(corpus.height, 1))}."
    )
    if q.height:
        big, small = q.row(0, named=True), q.row(-1, named=True)
        text += (
            f" By queries, {big['level1']} is the largest domain ({big['count']:,} queries, "
            f"{pct(big['share'])}) and {small['level1']} the smallest ({small['count']:,}, "
            f"{pct(small['share'])}); a query annotated with several domains counts in each."
        )
    return text


def read_coverage(coverage: pl.DataFrame) -> str:
    """Whether every domain holds its quota of queries, and why those that do not fall short."""
    if coverage.is_empty():
        return ""
    short = coverage.filter(pl.col("queries") < pl.col("quota"))
    if short.is_empty():
        return f"Every domain holds its quota of {coverage['quota'][0]} queries."
    parts = "; ".join(
        f"{r['domain']} has {r['queries']} of {r['quota']} ({r['status'].removeprefix('below quota: ')})"
        for r in short.iter_rows(named=True)
    )
    return f"{short.height} of {coverage.height} domains fall below their quota: {parts}."


def read_candidates(thresholds: pl.DataFrame, groups: pl.DataFrame) -> str:
    """The cut every candidate met (one global topic and summary threshold), each domain's own
    strictest point beside it, and the viable queries as counted: per domain, so a query
    annotated with two domains counts in both."""
    parts = []
    cols = thresholds.columns
    if "topic_threshold" in cols and "summary_threshold" in cols and thresholds.height:
        topic, summary = thresholds["topic_threshold"][0], thresholds["summary_threshold"][0]
        if topic is not None and summary is not None:
            parts.append(
                f"Every candidate was cut at topic > {topic:.3f} and summary > {summary:.3f}"
            )
    if "domain_topic_threshold" in cols:
        t = thresholds["domain_topic_threshold"].drop_nulls()
        unset = thresholds.height - t.len()
        if t.len():
            parts.append(
                f"each domain's own strictest topic point runs from {t.min():.3f} to "
                f"{t.max():.3f} across {t.len()} domains"
            )
        if unset:
            parts.append(f"{unset} domain(s) have no threshold (no viable query)")
    if "viable_queries" in cols:
        viable = int(thresholds["viable_queries"].fill_null(0).sum())
        parts.append(
            f"{viable:,} viable queries counted per domain (a query in several domains counts "
            "in each)"
        )
    text = "; ".join(parts) + ". " if parts else ""
    if groups.height:
        parts = ", ".join(
            f"{per_query:g} {group.replace('_', '-')}"
            for group, per_query in groups.select("group", "per_query").iter_rows()
        )
        text += f"Candidates per query and group: {parts}."
    return text.strip() or "No thresholds or candidates."


def read_tournament(stats: pl.DataFrame) -> str:
    row = stats.filter(pl.col("domain") == "all").row(0, named=True)
    share, lo, hi = row["first_shown_wins"], row["first_shown_low"], row["first_shown_high"]
    bias = (
        "no detectable position bias (the interval contains 50%)"
        if lo <= 0.5 <= hi
        else f"a position bias towards the {'first' if lo > 0.5 else 'second'} candidate shown"
    )
    return (
        f"{row['judgments']:,} judgments on {row['queries']:,} queries, {row['failures']:,} "
        f"failed ({pct(row['failures'] / max(row['judgments'], 1), 1)}). The candidate shown "
        f"first won {pct(share, 1)} of the decided ones (95% CI {pct(lo, 1)}–{pct(hi, 1)}): "
        f"{bias}."
    ) + (
        f" Judged again with the other candidate first, {pct(row['order_consistency'], 1)} of "
        f"{row['order_checked']:,} pairs got the same answer."
        if row.get("order_checked")
        else ""
    )


def read_leaderboard(board: pl.DataFrame, tests: pl.DataFrame | None = None) -> str:
    """Who leads each setting, and whether the lead is real: the paired randomization test
    (Holm-corrected) against the runner-up and the leader's rank interval, where computed."""
    out, m = [], score_column(board)
    at = m.split("@")[1]
    scored = board.filter(pl.col(m).is_not_nan() & pl.col(m).is_not_null())
    for (setting,), part in scored.group_by("setting", maintain_order=True):
        part = part.sort(m, descending=True)
        best = part.row(0, named=True)
        text = (
            f"In {setting}, {best['retriever']} leads with nDCG@{at} {best[m]:.3f} "
            f"[{best[CI_LOW]:.3f}, {best[CI_HIGH]:.3f}]"
        )
        if best.get("rank_ci"):
            text += f", rank {best['rank_ci']} at 95%"
        if best.get(CI_LOW_JOINT) is not None:
            corrected = best.get("ndcg_corrected")
            share = share_text(best.get("judge_noise_share"), best.get("judge_noise_share_se"))
            text += (
                f" ([{best[CI_LOW_JOINT]:.3f}, {best[CI_HIGH_JOINT]:.3f}]"
                + (f" around the judge-corrected {corrected:.3f}" if corrected is not None else "")
                + f" and rank {best['rank_ci_joint']} once the judge's noise is counted; the "
                f"judge's share of that interval's variance is {share})"
            )
        if part.height > 1:
            second = part.row(1, named=True)
            p = _pair_p(tests, setting, best["retriever"], second["retriever"])
            if p is not None:
                n_beaten = len([x for x in (best.get("beats") or "").split(", ") if x])
                text += (
                    f"; against the runner-up {second['retriever']} ({second[m]:.3f}) "
                    f"the paired randomization test gives p = {p:.3g} (Holm), so the lead is "
                    + ("significant" if p < 0.05 else "not significant")
                    + f"; it is significantly better than {n_beaten} of the other "
                    f"{part.height - 1}"
                )
            else:
                apart = second[CI_HIGH] < best[CI_LOW]
                text += f"; the runner-up {second['retriever']} ({second[m]:.3f}) is " + (
                    "outside its interval" if apart else "within reach (the intervals overlap)"
                )
        out.append(text + ".")
    return " ".join(out) or "No retriever has a score."


def _pair_p(tests: pl.DataFrame | None, setting: str, a: str, b: str) -> float | None:
    if tests is None or tests.height == 0:
        return None
    hit = tests.filter(
        (pl.col("setting") == setting)
        & (pl.col("domain") == "Overall")
        & (((pl.col("a") == a) & (pl.col("b") == b)) | ((pl.col("a") == b) & (pl.col("b") == a)))
    )
    return float(hit["p_randomization_holm"][0]) if hit.height else None


# ---------------------------------------------------------------------------------- render

_CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{margin-bottom:0}.sub{color:#666;margin-top:.2em}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
p.reading{background:#f6f8fa;border-left:4px solid #4a7;padding:.6em 1em}
table{border-collapse:collapse;font-size:13px;margin:.6em 0 1.2em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}
caption{text-align:left;font-weight:600;padding:.3em 0}
.wide{overflow-x:auto;max-width:100%}details{margin:.6em 0 1.2em}summary{cursor:pointer;font-weight:600}
figure{margin:1em 0}figcaption{color:#666;font-size:13px}img{max-width:100%}
nav a{margin-right:1em}
"""


SHOWN_ROWS = 15  # a longer table is collapsed under its caption (a click opens it)


def _table(caption: str, df: pl.DataFrame, max_rows: int = 500) -> str:
    """A table that scrolls sideways inside the page rather than run off it; past
    ``SHOWN_ROWS`` rows it is collapsed under its caption."""
    table = _table_html(caption, df, max_rows)
    if df.height <= SHOWN_ROWS:
        return f'<div class="wide">{table}</div>'
    return (
        f"<details><summary>{html.escape(caption)} ({df.height} rows)</summary>"
        f'<div class="wide">{table}</div></details>'
    )


def _table_html(caption: str, df: pl.DataFrame, max_rows: int) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(num(v))}</td>" for v in row) + "</tr>"
        for row in df.head(max_rows).iter_rows()
    )
    more = (
        f"<tr><td colspan={len(df.columns)}>… {df.height - max_rows} more rows</td></tr>"
        if df.height > max_rows
        else ""
    )
    return (
        f"<table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{rows}{more}</tbody></table>"
    )


def _anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def render_html(title: str, subtitle: str, sections: list[Section], verdict: str = "") -> str:
    """The report page; ``verdict``: the line on whether its numbers were verified."""
    nav = "".join(f'<a href="#{_anchor(s.title)}">{html.escape(s.title)}</a>' for s in sections)
    body = []
    for s in sections:
        body.append(f'<h2 id="{_anchor(s.title)}">{html.escape(s.title)}</h2>')
        body.append(f'<p class="reading">{html.escape(s.reading)}</p>')
        for caption, png in s.figures:
            body.append(
                f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
        body += [_table(caption, df) for caption, df in s.tables]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><p class="sub">{html.escape(subtitle)}</p>'
        f'<p class="verdict" id="verification">{html.escape(verdict)}</p>'
        f"<nav>{nav}</nav>{''.join(body)}</body></html>"
    )
