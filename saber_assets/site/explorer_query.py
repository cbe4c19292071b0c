"""The explorer's page of one query (``queries/<n>.html``), written ahead of time: a page loads
alone, nothing holds every query.

What is written as HTML: the problem and its solution with the mathematics as MathML, its
domains, topic paths and core idea. What the page's script (``query.js``) draws from the data
beside it (``window.QUERY``), so each judgment and each statement is written once:

- the systems on this query, per setting: nDCG@10, the rank each gave the best-graded candidate,
  and what each put first;
- why one system beats another here: the candidates in either's top 10, with their grades and
  both ranks, and each one's share of the nDCG difference;
- the candidates in the paper's three groups with BT strength, grade, wins and losses and the
  statement drawn; each expands to its own judgments: the opponent's grade and statement, which
  was shown first, the winner, P(first) and the judge's answer, and the order check's.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.lib.math_html import CSS as MATH_CSS
from saber_assets.lib.math_html import render
from saber_assets.runs.metrics import gains, ideal_dcg

TOP = 10
MISSING = -1  # a judgment's side that is not one of the query's candidates, or no winner


def query_page_name(number: int) -> str:
    return f"queries/{number}.html"


def esc(value) -> str:
    return html.escape("" if value is None else str(value))


def script_json(data) -> str:
    """``data`` as a JavaScript literal that is safe inside a ``<script>`` element too: no ``<``
    (so no ``</script>`` or ``<!--``) survives unescaped."""
    return json.dumps(data, default=str, ensure_ascii=False).replace("<", "\\u003c")


def text_html(text: str | None) -> str:
    """Prose with LaTeX as escaped HTML with MathML formulas (``math_html.render``)."""
    return render(text or "").html


def ranking(scores: list[float]) -> list[int]:
    """Candidate positions from the highest score down; equal scores in candidate order."""
    return sorted(range(len(scores)), key=lambda k: (-scores[k], k))


def system_rows(frame: pl.DataFrame | None) -> dict[str, dict[str, dict | None]]:
    """setting -> retriever -> {ndcg, order} (None: the run failed on this query)."""
    out: dict[str, dict[str, dict | None]] = {}
    if frame is None or not frame.height:
        return out
    for name, setting, ndcg, scores in (
        frame.sort("setting", "retriever").select("retriever", "setting", "ndcg", "scores").iter_rows()
    ):  # fmt: skip
        row = None if scores is None else {"ndcg": ndcg, "order": ranking(list(scores))}
        out.setdefault(setting, {})[name] = row
    return out


def judgment_rows(frame: pl.DataFrame | None, index: dict[str, int]) -> list[list]:
    """[round, a, b, shown first, winner, P(first), the judge's answer, the order check's
    winner] per judgment, candidates as their index (``MISSING``: none)."""
    if frame is None or not frame.height:
        return []
    cols = ["round", "a", "b", "shown_first", "winner", "p_first", "raw", "error"]
    swapped = "swapped_winner" in frame.columns
    rows = []
    for r in (
        frame.sort("round")
        .select(*cols, *(["swapped_winner"] if swapped else []))
        .iter_rows(named=True)
    ):
        rows.append(
            [
                r["round"],
                *(
                    index.get(r[k], MISSING) if r[k] is not None else MISSING
                    for k in ("a", "b", "shown_first", "winner")
                ),  # fmt: skip
                None if r["p_first"] is None else round(float(r["p_first"]), 4),
                r["raw"] or (f"error: {r['error']}" if r["error"] else ""),
                index.get(r["swapped_winner"], MISSING)
                if swapped and r["swapped_winner"] is not None
                else None,
            ]
        )
    return rows


def query_data(
    qid: str,
    cand_ids: list[str],
    grades: list[float],
    statements: list[str],
    ratings: pl.DataFrame | None,
    judgments: pl.DataFrame | None,
    runs: pl.DataFrame | None,
    page_of: dict[str, str],
    intervals: list[list[float]] | None = None,
) -> dict:
    """What the page's script draws: candidates (in the benchmark's order) with ``statements``
    (their HTML, ``text_html``), judgments, systems."""
    rated = {}
    if ratings is not None and ratings.height:
        rated = {
            c: (g, s) for c, g, s in ratings.select("candidate_id", "group", "strength").iter_rows()
        }
    index = {c: k for k, c in enumerate(cand_ids)}
    cands = []
    for k, (c, grade, statement) in enumerate(zip(cand_ids, grades, statements, strict=True)):
        group, strength = rated.get(c, (None, None))
        cands.append(
            {
                "id": c,
                "group": group,
                "strength": None if strength is None else round(float(strength), 4),
                "grade": round(float(grade), 4),
                "interval": intervals[k] if intervals else None,
                "html": statement,
                "page": ("../" + page_of[c]) if c in page_of else None,
            }
        )
    return {
        "id": qid,
        "top": TOP,
        "ideal_dcg": float(
            ideal_dcg(gains(np.asarray(grades, dtype=np.float64), "exponential"), TOP)
        ),
        "candidates": cands,
        "judgments": judgment_rows(judgments, index),
        "systems": system_rows(runs),
    }


def write_query_pages(
    out: Path,
    bench: Benchmark,
    tables: dict[str, pl.DataFrame],
    page_of: dict[str, str],
    nav: str,
    verdict: str = "",
    intervals: dict[str, list[list[float]]] | None = None,
) -> int:
    """One page per query under ``out``; ``tables``: the site's ``annotations``, ``ratings``,
    ``judgments`` and ``runs`` (``explorer.ExplorerInputs``); ``nav`` and ``verdict``: the
    site's navigation and header line; ``intervals``: each query's candidates' 95% grade
    intervals (``explorer.grade_intervals_of``)."""
    annotations = tables["annotations"]
    docs = bench.documents
    doc_id = docs["id"].to_list()
    problem = docs["problem"].to_list()
    ann = {
        r["id"]: r
        for r in annotations.select(
            "id", "summary", *[c for c in ("topic_paths",) if c in annotations.columns]
        ).iter_rows(named=True)
    }
    ratings, judged, runs = (
        {q: f for (q,), f in frame.group_by(key)} if frame.height else {}
        for frame, key in (
            (tables["ratings"], "query_id"),
            (tables["judgments"], "query"),
            (tables["runs"], "query_id"),
        )
    )
    fills: dict[str, dict[str, tuple[float | None, list]]] = {}
    fill = tables.get("fill")
    if fill is not None and fill.height:
        for q, d, g, by in fill.select("query_id", "document_id", "grade", "pooled_by").iter_rows():
            fills.setdefault(q, {})[d] = (g, by)
    rendered: dict[int, str] = {}  # a document is a candidate of many queries: drawn once

    def statement(row: int) -> str:
        if row not in rendered:
            rendered[row] = text_html(problem[row])
        return rendered[row]

    n = 0
    for number, q in enumerate(bench.queries.iter_rows(named=True)):
        qid = q["id"]
        cand_ids = [doc_id[c] for c in q["candidates"]]
        data = query_data(
            qid, cand_ids, list(q["relevance_scores"]), [statement(c) for c in q["candidates"]],
            ratings.get(qid), judged.get(qid), runs.get(qid), page_of,
            (intervals or {}).get(qid),
        )  # fmt: skip
        body = [
            f"<h1>Query {esc(qid)}</h1>",
            f"<p class='meta'>Domains: {esc(', '.join(q['domains']))} · "
            f"{len(cand_ids)} candidates · {len(data['judgments'])} judgments</p>",
            "<h2>Problem</h2>",
            text_html(q["problem"]),
            "<details><summary>Solution</summary>",
            text_html(q["solution"]),
            "</details>",
            annotation_html(ann.get(qid)),
            "<section id='systems'><h2>Systems on this query</h2><div class='app'>Loading…</div>"
            "</section>",
            "<section id='why'><h2>Why one system beats another here</h2><div class='app'>"
            "</div></section>",
            "<section id='candidates'><h2>Candidates</h2><p class='note'>Click a candidate for "
            "its judgments. 95% interval: where its grade lies given the judge's games (draws "
            "of the Bradley–Terry fit's Laplace posterior, rescaled like the grades).</p>"
            "<div class='app'></div></section>",
            full_top_html(
                runs.get(qid),
                dict(zip(cand_ids, q["relevance_scores"], strict=True)),
                fills.get(qid, {}),
            ),  # fmt: skip
        ]
        page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>SABER query {esc(qid)}</title>
<link rel="stylesheet" href="../assets/explorer.css"><style>{MATH_CSS}</style></head>
<body data-page="query">{nav}{verdict}<main>{"".join(body)}</main>
<script>window.QUERY = {script_json(data)};</script>
<script src="../assets/common.js"></script>
<script src="../assets/query.js"></script></body></html>
"""
        (out / query_page_name(number)).write_text(page, encoding="utf-8")
        n += 1
    return n


def full_top_html(
    runs: pl.DataFrame | None,
    graded: dict[str, float],
    filled: dict[str, tuple[float | None, list]],
) -> str:
    """Each system's full-corpus top k on this query, per setting: every document marked as
    graded by the tournament (T), placed by the fill (F, with who pooled it) or ungraded (·),
    its grade beside. Empty where no run kept its full-corpus top."""
    if runs is None or "full_top" not in runs.columns:
        return ""
    rows = runs.filter(pl.col("full_top").is_not_null()).sort("setting", "retriever")
    if rows.is_empty():
        return ""

    def cell(doc: str) -> str:
        if doc in graded:
            return f"<td class='graded' title='tournament'>T {graded[doc]:.2f}</td>"
        if doc in filled:
            grade, pooled = filled[doc]
            who = esc(", ".join(pooled))
            if grade is None:  # pooled, its games asked, none answered
                return f"<td class='hole' title='no game answered; pooled by {who}'>F ?</td>"
            return (
                f"<td class='filled' title='placed by the fill; pooled by {who}'>F {grade:.2f}</td>"
            )
        return "<td class='hole' title='no grade'>·</td>"

    parts = ["<section id='full-corpus'><h2>Full-corpus top 10</h2><p class='note'>Each "
             "system's best documents over the whole corpus: T graded by the tournament, F placed "
             "on this query's scale by the fill (hover: who pooled it), · no grade.</p>"]  # fmt: skip
    for (setting,), part in rows.group_by("setting", maintain_order=True):
        parts.append(f"<h3>{esc(setting)}</h3><table class='full-top'>")
        for name, top in part.select("retriever", "full_top").iter_rows():
            parts.append(f"<tr><th scope='row'>{esc(name)}</th>"
                         + "".join(cell(d) for d in top) + "</tr>")  # fmt: skip
        parts.append("</table>")
    return "".join(parts) + "</section>"


def annotation_html(row: dict | None) -> str:
    if row is None:
        return ""
    paths = row.get("topic_paths") or []
    items = "".join(
        f"<li>{html.escape(' › '.join(p) if isinstance(p, list) else str(p))}</li>" for p in paths
    )
    return f"<h2>Annotation</h2><p><b>Core idea:</b> {esc(row.get('summary') or 'none')}</p>" + (
        f"<p><b>Topic paths:</b></p><ul>{items}</ul>" if items else ""
    )
