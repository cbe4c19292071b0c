"""The benchmark explorer: a static site a person opens from `file://` with no network.

- ``index.html``: the leaderboard, sortable by any column and filtered by setting, domain and
  kind; each domain cell with the queries it averages, the rank interval, the tie groups of the
  paired test (``leaderboard.board.tie_groups``), contamination marks, a row's provenance on
  click, and the downloads (CSV, Parquet, the TREC runs). A score cell opens the query browser
  filtered to its domain and sorted by its system's score.
- ``queries.html``: the query browser: every query with its domains, stratum, the opening of its
  statement with the mathematics drawn, the systems' mean and spread of nDCG@10 on it, how unsure
  the judge left its grades (the mean 95% width of its candidates' grade posteriors) and how
  often the candidate shown first won; searchable by id and text, filterable, sortable.
- ``queries/<n>.html``: one page per query (``explorer_query.py``).
- ``compare.html``: two systems in one setting, query by query: a scatter of their nDCG@10
  (Chart.js, vendored), coloured by domain, each point a link; the paired test's p-value, the
  per-domain split and the queries where they differ most.
- ``diff.html``: what changed since the previous build this explorer showed
  (``build_diff.py``: the explorer keeps a snapshot of each build under ``<outputs>/builds``).

Formulas are MathML made ahead of time (``math_html``: latex2mathml, pinned in the lock file),
which Chromium and Firefox draw natively: a page carries no math script and no font to load.
The data of the script pages ships as ``data/site.js`` (``window.SABER = …``): a browser reads a
script from `file://`, not a fetched JSON file. Pure: no Dagster; the asset gathers the tables.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.benchmark.data import Benchmark, verification_line
from saber_assets.leaderboard.board import TABLE, TABLE_CSV, TESTS_CSV, for_page, score_column
from saber_assets.leaderboard.joint import benchmark_posteriors, grade_intervals, share_texts
from saber_assets.lib.math_html import CSS as MATH_CSS
from saber_assets.lib.math_html import render, spans
from saber_assets.outputs import folder_written_whole
from saber_assets.site.explorer_query import (
    esc,
    query_page_name,
    script_json,
    write_query_pages,
)
from saber_assets.tournament.engine import order_consistency, position_bias

STATIC = ("explorer.css", "common.js", "explorer.js", "query.js", "vendor/chart.umd.min.js")
RUNS_PAGE = "runs/"
SNIPPET = 240  # characters of a statement the browser shows (a formula is never cut)
SEARCH_TEXT = 4000  # characters of a statement the browser's search reads
WIDTH_DRAWS = (
    4_000  # posterior draws per query: at 400 the widths varied by their own noise (SD 0.021)
)
WIDTH_SEED = 0
# the board's downloads, relative to the outputs folder (the site links them as ``../<path>``;
# `saber report --serve` serves these and the site, nothing else: explorer_server.py)
DOWNLOADS = {
    TABLE_CSV: f"leaderboard/{TABLE_CSV}",
    TABLE: f"leaderboard/{TABLE}",
    TESTS_CSV: f"leaderboard/{TESTS_CSV}",
    "the TREC runs (a folder per retriever)": RUNS_PAGE,
}
PAGES = {  # script page -> (file, title in the navigation)
    "board": ("index.html", "Leaderboard"),
    "queries": ("queries.html", "Queries"),
    "compare": ("compare.html", "Compare two systems"),
    "diff": ("diff.html", "What changed"),
}


def site_links() -> dict[str, str]:
    """The downloads as the site links them (from ``explorer/``)."""
    return {label: f"../{path}" for label, path in DOWNLOADS.items()}


@dataclass
class ExplorerInputs:
    bench: Benchmark
    board: pl.DataFrame  # leaderboard.csv
    tests: pl.DataFrame  # significance.parquet
    runs: pl.DataFrame  # retriever, query_id, setting, ndcg, scores (candidate order), full_top
    ratings: pl.DataFrame  # relevance_ratings: query_id, candidate_id, group, strength, rating
    judgments: pl.DataFrame  # tournament_judgments
    annotations: pl.DataFrame  # problem_annotations: id, summary, domains, topic paths
    downloads: dict[str, str]  # label -> path relative to the site
    diff: dict | None = field(default=None)  # build_diff.diff_data against the previous build
    fill: pl.DataFrame | None = field(default=None)  # full_corpus_fill: the placed holes


def snippet_source(text: str, limit: int = SNIPPET) -> str:
    """The opening of ``text`` up to about ``limit`` characters, never cut inside a formula: a
    cut that falls in one moves before it, or past it when the formula opens the text."""
    if len(text) <= limit:
        return text
    cut = limit
    for span in spans(text[: limit * 4]):
        if span.start >= cut:
            break
        if span.end > cut:
            cut = span.start if span.start > limit // 3 else span.end
            break
    return text[:cut].rstrip() + " …"


def snippet_html(text: str | None, limit: int = SNIPPET) -> str:
    """The opening of a statement as HTML with its formulas as MathML (``math_html.render``)."""
    return render(snippet_source(text or "", limit)).html


def search_text(text: str | None) -> str:
    return " ".join((text or "").split())[:SEARCH_TEXT].lower()


def judge_facts(judgments: pl.DataFrame) -> dict[str, dict]:
    """Per query: its judgments, the decided ones and how many the candidate shown first won
    (``tournament.engine.position_bias``), and the pairs asked again in the other order and how
    many of those changed winner (``order_consistency``): the tournament's own measures, per query."""
    out = {}
    for (qid,), part in judgments.group_by("query") if judgments.height else ():
        bias = position_bias(part)
        agree, rechecked, _, _ = order_consistency(part)
        out[qid] = {"judgments": part.height, "decided": bias.decided, "first_won": bias.first_wins,
                    "rechecked": rechecked, "flipped": rechecked - agree}  # fmt: skip
    return out


def grade_intervals_of(bench: Benchmark) -> tuple[dict[str, list[list[float]]], str | None]:
    """Per query, each candidate's 95% posterior interval of its grade, in the benchmark's
    candidate order (``joint.grade_intervals``, seeded by (WIDTH_SEED, crc32(query id))); or none
    and why (a benchmark without judgments, or with soft grades)."""
    posteriors, why = benchmark_posteriors(bench)
    out = {}
    for qid, post in posteriors.items():
        rng = np.random.default_rng([WIDTH_SEED, zlib.crc32(qid.encode())])
        lo, hi = grade_intervals(post, rng, WIDTH_DRAWS)
        out[qid] = [[round(float(a), 3), round(float(b), 3)] for a, b in zip(lo, hi, strict=True)]
    return out, why


def query_rows(inputs: ExplorerInputs, intervals: dict[str, list[list[float]]]) -> list[dict]:
    """One row per query for the browser: id, page, domains, stratum, the statement's opening
    (HTML) and its searchable text, the judge's facts and the mean width of its candidates'
    grade ``intervals`` (``grade_intervals_of``)."""
    q = inputs.bench.queries
    facts = judge_facts(inputs.judgments)
    widths = {k: float(np.mean([b - a for a, b in v])) for k, v in intervals.items() if v}
    rows = []
    for n, (qid, doms, problem) in enumerate(q.select("id", "domains", "problem").iter_rows()):
        f = facts.get(qid, {})
        rows.append(
            {
                "id": qid,
                "page": query_page_name(n),
                "domains": doms,
                "stratum": " + ".join(doms),
                "snippet": snippet_html(problem),
                "text": search_text(problem),
                "judgments": f.get("judgments", 0),
                "first_won": f.get("first_won", 0),
                "decided": f.get("decided", 0),
                "rechecked": f.get("rechecked", 0),
                "flipped": f.get("flipped", 0),
                "width": None if qid not in widths else round(widths[qid], 4),
            }
        )
    return rows


def ndcg_columns(runs: pl.DataFrame, query_ids: list[str]) -> dict[str, dict[str, list]]:
    """setting -> retriever -> nDCG@10 per query in the browser's order (None: not run there)."""
    position = {q: k for k, q in enumerate(query_ids)}
    out: dict[str, dict[str, list]] = {}
    table = runs.select("retriever", "setting", "query_id", "ndcg").unique(
        ["retriever", "setting", "query_id"], keep="first"
    )
    for (setting, retriever), part in table.sort("setting", "retriever").group_by(
        "setting", "retriever", maintain_order=True
    ):
        column: list = [None] * len(query_ids)
        for qid, value in part.select("query_id", "ndcg").iter_rows():
            if qid in position and value is not None:
                column[position[qid]] = round(float(value), 6)
        out.setdefault(str(setting), {})[str(retriever)] = column
    return out


def board_data(board: pl.DataFrame, domains: list[str], coverage: list[dict]) -> dict:
    metric = score_column(board)
    if "judge_noise_share" in board.columns:  # to the precision its draws support
        board = board.with_columns(share_texts(board).alias("judge_share_text"))
    rows = board.to_dicts()  # with each domain's mean, interval and count, which its view shows
    return {
        "metric": metric,
        "domains": domains,
        "columns": for_page(domains),  # the script reads a domain's cells by these names
        "coverage": coverage,
        "rows": [{k: v for k, v in r.items() if v is not None} for r in rows],
    }


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
    (out / "assets" / "vendor").mkdir(parents=True)
    for name in STATIC:
        data = resources.files("saber_assets.site").joinpath("explorer_static", name)
        (out / "assets" / name).write_bytes(data.read_bytes())
    bench = inputs.bench
    domains = bench.domain_list()
    coverage = bench.manifest.get("coverage") or []
    intervals, _ = grade_intervals_of(bench)
    queries = query_rows(inputs, intervals)
    overall = (
        inputs.tests.filter(pl.col("domain") == "Overall") if inputs.tests.height else inputs.tests
    )
    data = {
        "board": board_data(inputs.board, domains, coverage),
        "queries": queries,
        "ndcg": ndcg_columns(inputs.runs, [r["id"] for r in queries]),
        "tests": overall.select(
            "setting", "a", "b", "mean_diff", "p_randomization_holm", "better"
        ).to_dicts()
        if overall.height
        else [],
        "downloads": inputs.downloads,
        "name": bench.manifest.get("name", ""),
        "width_rule": f"the mean over its candidates of the 95% interval width of the grade's "
        f"posterior ({WIDTH_DRAWS} draws of its Bradley–Terry fit's Laplace posterior)",
        "diff": inputs.diff,
    }
    (out / "data" / "site.js").write_text(
        "window.SABER = " + script_json(data) + ";\n", encoding="utf-8"
    )
    verdict = verdict_html(bench.manifest)
    pages = [p for p in PAGES if p != "diff" or inputs.diff is not None]
    for page in pages:
        file, title = PAGES[page]
        (out / file).write_text(shell(title, page, verdict, pages), encoding="utf-8")
    page_of = {r["id"]: r["page"] for r in queries}
    tables = {"annotations": inputs.annotations, "ratings": inputs.ratings,
              "judgments": inputs.judgments, "runs": inputs.runs, "fill": inputs.fill}  # fmt: skip
    n = write_query_pages(out, bench, tables, page_of, nav_html(pages, "../"), verdict, intervals)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return {"query_pages": n, "bytes": size}


def verdict_html(manifest: dict) -> str:
    """The header's line on whether the numbers below were verified (``saber verify``)."""
    v = manifest.get("verification")
    passed = isinstance(v, dict) and v.get("passed") is True
    return (
        f'<p id="verification" class="{"verified" if passed else "unverified"}">'
        f"{esc(verification_line(manifest))}</p>"
    )


def nav_html(pages: list[str], prefix: str = "") -> str:
    return (
        "<nav>"
        + " · ".join(f'<a href="{prefix}{PAGES[p][0]}">{esc(PAGES[p][1])}</a>' for p in pages)
        + "</nav>"
    )


def shell(title: str, page: str, verdict: str = "", pages: list[str] | None = None) -> str:
    """A script page: the shared data, the app, and a place for it to draw."""
    chart = '<script src="assets/vendor/chart.umd.min.js"></script>\n' if page == "compare" else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>SABER explorer: {esc(title)}</title>
<link rel="stylesheet" href="assets/explorer.css"><style>{MATH_CSS}</style></head>
<body data-page="{page}">
{nav_html(pages or list(PAGES))}
{verdict}
<main id="app"><p>Loading…</p></main>
<script src="data/site.js"></script>
{chart}<script src="assets/common.js"></script>
<script src="assets/explorer.js"></script>
</body></html>
"""
