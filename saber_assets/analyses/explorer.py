"""The benchmark explorer: a static site a person opens from `file://` with no network.

- ``index.html``: the leaderboard, sortable by any column and filtered by setting, domain and
  kind; each domain cell with the queries it averages, the rank interval, the tie groups of the
  paired test (``leaderboard.board.tie_groups``), contamination marks, a row's provenance on
  click, and the downloads (CSV, Parquet, the TREC runs).
- ``queries/<n>.html``: one page per query, written ahead of time (a page loads alone: nothing
  holds every query): problem and solution with the mathematics as MathML, domains, topic paths
  and core idea, the candidates in the paper's three groups with BT strength, grade and wins and
  losses, every judgment of the tournament, each retriever's top 10 and its nDCG.
- ``compare.html``: two systems in one setting, query by query (ΔnDCG), with the paired test's
  p-value and the per-domain split.

The data of the two script pages ships as ``data/*.js`` (``window.SABER = …``): a browser reads a
script from `file://`, not a fetched JSON file. Pure: no Dagster; the asset gathers the tables.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import polars as pl

from saber_assets.analyses.math_html import CSS as MATH_CSS
from saber_assets.analyses.math_html import render
from saber_assets.benchmark.data import Benchmark, verification_line
from saber_assets.leaderboard.joint import share_texts
from saber_assets.leaderboard.metrics import score_column
from saber_assets.outputs import folder_written_whole

TOP = 10
STATIC = ("explorer.css", "explorer.js")
RUNS_PAGE = "runs/"
# the board's downloads, relative to the outputs folder (the site links them as ``../<path>``;
# `saber report --serve` serves these and the site, nothing else: explorer_server.py)
DOWNLOADS = {
    "leaderboard.csv": "leaderboard/leaderboard.csv",
    "leaderboard.parquet": "leaderboard/leaderboard.parquet",
    "significance.csv": "leaderboard/significance.csv",
    "the TREC runs (a folder per retriever)": RUNS_PAGE,
}


def site_links() -> dict[str, str]:
    """The downloads as the site links them (from ``explorer/``)."""
    return {label: f"../{path}" for label, path in DOWNLOADS.items()}


@dataclass
class ExplorerInputs:
    bench: Benchmark
    board: pl.DataFrame  # leaderboard.csv
    tests: pl.DataFrame  # significance.parquet
    runs: pl.DataFrame  # retriever, query_id, setting, ndcg, scores (candidate order)
    ratings: pl.DataFrame  # relevance_ratings: query_id, candidate_id, group, strength, rating
    judgments: pl.DataFrame  # tournament_judgments
    annotations: pl.DataFrame  # problem_annotations: id, summary, domains, topic paths
    downloads: dict[str, str]  # label -> path relative to the site


def query_page_name(number: int) -> str:
    return f"queries/{number}.html"


def esc(value) -> str:
    return html.escape("" if value is None else str(value))


def text_html(text: str | None) -> str:
    """Prose with LaTeX as escaped HTML with MathML formulas (``math_html.render``)."""
    return f'<div class="saber-text">{render(text or "").html}</div>'


def wins_losses(judgments: pl.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """(query, candidate) -> (wins, losses) over the decided judgments."""
    if not judgments.height:
        return {}
    decided = judgments.filter(pl.col("winner").is_not_null())
    out: dict[tuple[str, str], list[int]] = {}
    for q, a, b, w in decided.select("query", "a", "b", "winner").iter_rows():
        for c in (a, b):
            out.setdefault((q, c), [0, 0])[0 if c == w else 1] += 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def board_data(board: pl.DataFrame, domains: list[str], coverage: list[dict]) -> dict:
    metric = score_column(board)
    if "judge_noise_share" in board.columns:  # to the precision its draws support
        board = board.with_columns(share_texts(board).alias("judge_share_text"))
    rows = board.to_dicts()  # with each domain's "<domain> ci", which a domain's view shows
    return {
        "metric": metric,
        "domains": domains,
        "coverage": coverage,
        "rows": [{k: v for k, v in r.items() if v is not None} for r in rows],
    }


def query_rows(inputs: ExplorerInputs) -> list[dict]:
    """One dict per query: its id, its page and its domains (for the compare page)."""
    q = inputs.bench.queries
    return [
        {"id": qid, "page": query_page_name(n), "domains": doms}
        for n, (qid, doms) in enumerate(q.select("id", "domains").iter_rows())
    ]


def write_site(site: Path, inputs: ExplorerInputs) -> dict:
    """Write the whole site as ``site`` (replacing the old one only once it is whole); returns
    pages and bytes written."""
    with folder_written_whole(site) as out:
        written = write_site_files(out, inputs)
    return written


def write_site_files(out: Path, inputs: ExplorerInputs) -> dict:
    """The site's files under the empty folder ``out``."""
    (out / "data").mkdir(parents=True)
    (out / "queries").mkdir()
    (out / "assets").mkdir()
    for name in STATIC:
        data = resources.files("saber_assets.analyses").joinpath("explorer_static", name)
        (out / "assets" / name).write_bytes(data.read_bytes())
    bench = inputs.bench
    domains = bench.domain_list()
    coverage = bench.manifest.get("coverage") or []
    queries = query_rows(inputs)
    page_of = {r["id"]: r["page"] for r in queries}
    ndcg = (
        inputs.runs.select("retriever", "setting", "query_id", "ndcg")
        .unique(["retriever", "setting", "query_id"], keep="first")
        .sort("retriever", "setting", "query_id")
    )
    overall = (
        inputs.tests.filter(pl.col("domain") == "Overall") if inputs.tests.height else inputs.tests
    )
    data = {
        "board": board_data(inputs.board, domains, coverage),
        "queries": queries,
        "ndcg": ndcg.to_dicts(),
        "tests": overall.select(
            "setting", "a", "b", "mean_diff", "p_randomization_holm", "better"
        ).to_dicts()
        if overall.height
        else [],
        "downloads": inputs.downloads,
        "name": bench.manifest.get("name", ""),
    }
    (out / "data" / "site.js").write_text(
        "window.SABER = " + json.dumps(data, default=str) + ";\n", encoding="utf-8"
    )
    verdict = verdict_html(bench.manifest)
    (out / "index.html").write_text(shell("Leaderboard", "board", verdict), encoding="utf-8")
    (out / "compare.html").write_text(
        shell("Compare two systems", "compare", verdict), encoding="utf-8"
    )
    pages = write_query_pages(out, inputs, page_of, verdict)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {"query_pages": pages, "bytes": size}


def verdict_html(manifest: dict) -> str:
    """The header's line on whether the numbers below were verified (``saber verify``)."""
    v = manifest.get("verification")
    passed = isinstance(v, dict) and v.get("passed") is True
    return (
        f'<p id="verification" class="{"verified" if passed else "unverified"}">'
        f"{esc(verification_line(manifest))}</p>"
    )


def shell(title: str, page: str, verdict: str = "") -> str:
    """A script page: the shared data, the app, and a place for it to draw."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>SABER explorer: {esc(title)}</title>
<link rel="stylesheet" href="assets/explorer.css"></head>
<body data-page="{page}">
<nav><a href="index.html">Leaderboard</a> · <a href="compare.html">Compare two systems</a></nav>
{verdict}
<main id="app"><p>Loading…</p></main>
<script src="data/site.js"></script>
<script src="assets/explorer.js"></script>
</body></html>
"""


def write_query_pages(
    out: Path, inputs: ExplorerInputs, page_of: dict[str, str], verdict: str = ""
) -> int:
    """One page per query; ``verdict``: the header line of ``verdict_html``."""
    bench = inputs.bench
    docs = bench.documents
    doc_id = docs["id"].to_list()
    problem = docs["problem"].to_list()
    row_of = {d: i for i, d in enumerate(doc_id)}
    ann = {
        r["id"]: r
        for r in inputs.annotations.select(
            "id", "summary", *[c for c in ("topic_paths",) if c in inputs.annotations.columns]
        ).iter_rows(named=True)
    }
    wl = wins_losses(inputs.judgments)
    ratings, judged, runs = (
        {q: f for (q,), f in frame.group_by(key)} if frame.height else {}
        for frame, key in (
            (inputs.ratings, "query_id"),
            (inputs.judgments, "query"),
            (inputs.runs, "query_id"),
        )
    )
    n = 0
    for number, q in enumerate(bench.queries.iter_rows(named=True)):
        qid = q["id"]
        grade = {doc_id[c]: g for c, g in zip(q["candidates"], q["relevance_scores"], strict=True)}
        cand_ids = [doc_id[c] for c in q["candidates"]]
        body = [
            f"<h1>Query {esc(qid)}</h1>",
            f"<p class='meta'>Domains: {esc(', '.join(q['domains']))}</p>",
            "<h2>Problem</h2>",
            text_html(q["problem"]),
            "<details><summary>Solution</summary>",
            text_html(q["solution"]),
            "</details>",
            annotation_html(ann.get(qid)),
            candidates_html(ratings.get(qid), grade, wl, qid, problem, row_of),
            judgments_html(judged.get(qid), problem, row_of),
            top10_html(runs.get(qid), cand_ids, grade, page_of),
        ]
        page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>SABER query {esc(qid)}</title>
<link rel="stylesheet" href="../assets/explorer.css"><style>{MATH_CSS}</style></head>
<body><nav><a href="../index.html">Leaderboard</a> · <a href="../compare.html">Compare two
systems</a></nav>{verdict}<main>{"".join(body)}</main></body></html>
"""
        (out / query_page_name(number)).write_text(page, encoding="utf-8")
        n += 1
    return n


def annotation_html(row: dict | None) -> str:
    if row is None:
        return ""
    paths = row.get("topic_paths") or []
    items = "".join(f"<li>{esc(' › '.join(p) if isinstance(p, list) else p)}</li>" for p in paths)
    return f"<h2>Annotation</h2><p><b>Core idea:</b> {esc(row.get('summary') or 'none')}</p>" + (
        f"<p><b>Topic paths:</b></p><ul>{items}</ul>" if items else ""
    )


def statement(problem: list[str], row_of: dict[str, int], cid: str, limit: int = 160) -> str:
    text = problem[row_of[cid]] if cid in row_of else ""
    return esc(text if len(text) <= limit else text[: limit - 1] + "…")


def candidates_html(frame, grade, wl, qid, problem, row_of) -> str:
    if frame is None or not frame.height:
        return "<h2>Candidates</h2><p>No ratings for this query.</p>"
    parts = ["<h2>Candidates</h2>"]
    for group in ("topic_only", "summary_only", "both"):
        part = frame.filter(pl.col("group") == group).sort("rating", descending=True)
        rows = "".join(
            f"<tr><td>{esc(c)}</td><td>{s:.3f}</td><td>{grade.get(c, r):.2f}</td>"
            f"<td>{wl.get((qid, c), (0, 0))[0]}–{wl.get((qid, c), (0, 0))[1]}</td>"
            f"<td>{statement(problem, row_of, c)}</td></tr>"
            for c, s, r in part.select("candidate_id", "strength", "rating").iter_rows()
        )
        parts.append(
            f"<h3>{group.replace('_', '-')} ({part.height})</h3><table class='cands'><thead><tr>"
            "<th>candidate</th><th>BT strength</th><th>grade</th><th>wins–losses</th>"
            f"<th>statement</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    return "".join(parts)


def judgments_html(frame, problem, row_of) -> str:
    if frame is None or not frame.height:
        return "<h2>Judgments</h2><p>No judgment stored for this query.</p>"
    rows = "".join(
        f"<tr><td>{rnd}</td><td>{esc(a)}</td><td>{esc(b)}</td><td>{esc(first)}</td>"
        f"<td>{esc(winner or 'none')}</td><td>{'' if p is None else f'{p:.2f}'}</td>"
        f"<td>{esc(raw or error or '')}</td></tr>"
        for rnd, a, b, first, winner, p, raw, error in frame.sort("round")
        .select("round", "a", "b", "shown_first", "winner", "p_first", "raw", "error")
        .iter_rows()
    )
    return (
        f"<h2>Judgments ({frame.height})</h2><table class='judgments'><thead><tr><th>round</th>"
        "<th>a</th><th>b</th><th>shown first</th><th>winner</th><th>P(first)</th>"
        f"<th>raw answer</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def top10_html(frame, cand_ids, grade, page_of) -> str:
    if frame is None or not frame.height:
        return ""
    parts = ["<h2>Retrievers on this query</h2>"]
    ideal = sorted(grade.values(), reverse=True)[:TOP]
    for (setting,), part in frame.sort("setting", "retriever").group_by(
        "setting", maintain_order=True
    ):
        rows = []
        for name, ndcg, scores in part.select("retriever", "ndcg", "scores").iter_rows():
            if scores is None:
                rows.append(f"<tr><td>{esc(name)}</td><td>failed</td><td></td></tr>")
                continue
            order = sorted(range(len(scores)), key=lambda k: -scores[k])[:TOP]
            top = ", ".join(
                f"<span class='{'hit' if grade[cand_ids[k]] >= min(ideal) else 'miss'}'>"
                f"{esc(cand_ids[k])} ({grade[cand_ids[k]]:.1f})</span>"
                for k in order
            )
            rows.append(f"<tr><td>{esc(name)}</td><td>{ndcg:.4f}</td><td>{top}</td></tr>")
        parts.append(
            f"<h3>{esc(setting)}</h3><table class='runs'><thead><tr><th>retriever</th>"
            f"<th>nDCG@{TOP}</th><th>top {TOP} (grade; a hit is in the ideal top {TOP})</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)
