"""The benchmark explorer in a real browser: the site the tiny build wrote, opened from file://
in headless Chromium, read by what it renders (not its HTML source)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request

import polars as pl
import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.support.ui import WebDriverWait

from saber_assets.benchmark.data import Benchmark
from saber_assets.cli import main
from saber_assets.config import REPO_ROOT

from .chromium import open_until, text


def set_select(browser: Chrome, element: str, value: str) -> None:
    browser.execute_script(
        "const s = document.getElementById(arguments[0]); s.value = arguments[1];"
        " s.dispatchEvent(new Event('change'));",
        element,
        value,
    )


def board_rows(browser: Chrome) -> list[list[str]]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#board tbody tr.board-row')]"
        ".map(tr => [...tr.children].map(td => td.innerText.trim()))"
    )


def head(browser: Chrome) -> str:
    return browser.execute_script("return document.querySelector('#board thead').innerText")


def until(browser: Chrome, check, what: str, timeout_s: float = 10):
    """Wait until ``check(browser)`` is truthy (the page redraws after an event); its value."""
    return WebDriverWait(browser, timeout_s, 0.1, ()).until(check, what)


def test_the_explorer_shows_the_board_a_query_and_a_comparison(shared_build, browser):
    site = shared_build("tiny").home / "tiny" / "explorer"
    index = (site / "index.html").resolve().as_uri()
    page_text = open_until(browser, index, ["Leaderboard", "tie group", "Domains", "Downloads"])
    rows = board_rows(browser)
    assert rows and all(re.fullmatch(r"T\d+", r[0]) for r in rows), rows  # tie groups drawn
    assert all(re.search(r"\(n=\d+\)", r[3]) for r in rows), rows  # each cell's queries
    # the judge's noise beside the query-only interval: its interval, share and rank
    assert "95% CI, + judge" in head(browser) and "judge share" in head(browser)
    assert "rank, + judge" in head(browser)
    # the interval beside the judge-corrected score it is centred on, the share to its precision
    assert "+ judge: corrected" in head(browser)
    assert all(re.fullmatch(r"\d\.\d{3}", r[5]) for r in rows), rows
    assert all(re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", r[6]) for r in rows), rows
    assert all(re.fullmatch(r"\d(\.\d+)? ± \d(\.\d+)?", r[7]) for r in rows), rows
    # the header says the numbers were verified from the benchmark's own files
    verdict = browser.find_element("id", "verification")
    assert verdict.text.startswith("Verified: ") and "verified" in verdict.get_attribute("class")
    assert "leaderboard.csv" in page_text and "queries (" in page_text
    # sort: the score column ascending, then descending again
    first = [r[1] for r in rows]
    browser.execute_script(
        "[...document.querySelectorAll('#board th button')]"
        ".find(b => b.innerText.startsWith('ndcg@10')).click()"
    )
    if len(set(first)) > 1:
        until(browser, lambda b: [r[1] for r in board_rows(b)] == first[::-1], "sorted rows")
    # filter a domain: the score column becomes that domain's, with its own query count
    domain = browser.execute_script("return document.getElementById('domain').options[1].value")
    set_select(browser, "domain", domain)
    until(browser, lambda b: f"{domain} nDCG" in head(b), f"the {domain} column")
    filtered = board_rows(browser)  # the domain's own interval beside its score
    assert all(re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]|", r[4]) for r in filtered), filtered
    assert any(r[4] for r in filtered), filtered
    # a row's provenance on click
    browser.execute_script("document.querySelector('#board tbody tr.board-row').click()")
    until(browser, lambda b: "Provenance — " in text(b), "the provenance panel")
    assert "row_id:" in text(browser)

    # a domain's score cell opens the query browser on that domain, sorted by that system
    browser.execute_script(
        "document.querySelector('#board tbody tr.board-row a.score-link').click()"
    )
    until(
        browser,
        lambda b: b.execute_script("return document.body.dataset.page") == "queries",
        "the browser",
    )
    until(browser, lambda b: browser_rows(b), "the browser's rows")
    system = browser.execute_script("return document.getElementById('browser-system').value")
    assert system and f"{system} nDCG@10" in browser.execute_script(
        "return document.querySelector('#queries thead').innerText"
    )
    rows = browser_rows(browser)
    assert all(domain in r[1] for r in rows), rows
    scores = [float(r[5]) for r in rows if r[5]]
    assert scores == sorted(scores, reverse=True) and len(scores) == len(rows)
    _find_a_query_and_read_its_page(browser, site)
    _compare_has_a_chart_of_links(browser, site)


def browser_rows(browser: Chrome) -> list[list[str]]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#queries tbody tr')]"
        ".map(tr => [...tr.children].map(td => td.innerText.trim()))"
    )


def _find_a_query_and_read_its_page(browser: Chrome, site) -> None:
    """Search by a phrase of a statement, open the query, read its mathematics, expand a
    candidate to its judgments."""
    home = site.parent
    bench = Benchmark.read(home / "evaluation_benchmark")
    judgments = pl.concat(
        [
            pl.read_parquet(f)
            for f in sorted((home / "parquet" / "tournament_judgments").glob("*.parquet"))
        ]
    )
    problems = bench.queries["problem"].to_list()
    # a phrase of plain words from a statement that holds a formula
    number, phrase = next(
        (n, " ".join(m.group(0).split()))
        for n, p in enumerate(problems)
        if "$" in p and (m := re.search(r"[A-Za-z,]+(?: [A-Za-z,]+){3}", p))
    )
    wanted = {
        q for q, p in zip(bench.queries["id"].to_list(), problems, strict=True)
        if phrase.lower() in " ".join(p.split()).lower()
    }  # fmt: skip
    browser.get((site / "queries.html").resolve().as_uri())
    search = until(browser, lambda b: b.find_element("id", "search"), "the search box")
    search.send_keys(phrase)
    until(
        browser,
        lambda b: {r[0] for r in browser_rows(b)} == wanted,
        f"the queries holding {phrase!r}",
    )
    # the statements are drawn: MathML in the snippets, not dollar signs
    assert (
        browser.execute_script(
            "return document.querySelectorAll('#queries td.snippet math').length"
        )
        > 0
    )
    qid = bench.queries["id"][number]
    browser.execute_script(  # a click on the row's statement, not its link, opens the query
        "[...document.querySelectorAll('#queries tbody tr')].find(tr => tr.dataset.id === arguments[0])"
        ".querySelector('td.snippet').click()", qid,
    )  # fmt: skip
    page_text = open_until(browser, None, ["Systems on this query", "Why one system beats another"])
    assert f"Query {qid}" in page_text
    until(
        browser,
        lambda b: b.execute_script("return document.body.dataset.ready") == "1",
        "the page's script",
    )
    # every candidate statement holding a formula shows it as MathML, no `$` left
    cands = browser.execute_script(
        "return [...document.querySelectorAll('#candidates tr.cand-row')].map(tr => "
        "[tr.dataset.candidate, tr.querySelectorAll('math').length, tr.lastElementChild.innerText])"
    )
    doc_text = dict(bench.documents.select("id", "problem").iter_rows())
    intervals = browser.execute_script(
        "return [...document.querySelectorAll('#candidates tr.cand-row td.interval')].map(td => td.innerText)"
    )  # each grade's 95% posterior interval, from the judge's games
    assert len(intervals) == len(cands) and all(
        re.fullmatch(r"\[\d\.\d\d, \d\.\d\d\]", i) for i in intervals
    )
    with_math = [c for c in cands if "$" in doc_text[c[0]]]
    assert with_math and all(n > 0 and "$" not in shown for _, n, shown in with_math), with_math[:3]
    # the systems on this query, one row each
    systems = browser.execute_script(
        "return document.querySelectorAll('#systems-table tr.system-row').length"
    )
    assert systems >= 2
    # a system's row opens its top 10, the grades beside
    browser.execute_script("document.querySelector('#systems tr.system-row').click()")
    top = until(browser, lambda b: b.execute_script(
        "return [...document.querySelectorAll('#systems tr.system-top li')].map(li => li.innerText)"
    ), "a system's top 10")  # fmt: skip
    assert len(top) == min(10, len(cands)) and all(re.search(r"\(\d\.\d{2}\)$", t) for t in top), (
        top
    )
    assert re.search(r"ranks \d+ of the \d+ candidates in either top 10", text(browser))
    # each candidate expands to its own judgments (won ones marked), its opponents drawn beside
    expected = {}
    for cand, _, _ in cands:
        played = judgments.filter(
            (pl.col("query") == qid) & ((pl.col("a") == cand) | (pl.col("b") == cand))
        )
        won = played.filter(pl.col("winner") == cand).height
        lost = played.filter(pl.col("winner").is_not_null() & (pl.col("winner") != cand)).height
        expected[cand] = (played.height, won, f"{won}–{lost}")
        browser.execute_script(
            "document.querySelector(`#candidates tr.cand-row[data-candidate='${arguments[0]}']`).click()",
            cand,
        )
    seen = until(browser, lambda b: b.execute_script(
        "const out = {};"
        "for (const tr of document.querySelectorAll('#candidates tr.cand-judgments')) {"
        "  const t = tr.previousElementSibling.dataset.candidate;"
        "  out[t] = [tr.querySelectorAll('tr.judgment').length, tr.querySelectorAll('tr.judgment.won').length,"
        "            tr.previousElementSibling.querySelector('td.wins').innerText,"
        "            tr.querySelectorAll('tr.judgment math').length]; }"
        "return Object.keys(out).length === arguments[0] ? out : null;", len(cands)
    ), "every candidate's judgments")  # fmt: skip
    assert {c: tuple(v[:3]) for c, v in seen.items()} == expected
    assert sum(n for n, _, _ in expected.values()) > 0 and any(v[3] for v in seen.values())


def _compare_has_a_chart_of_links(browser: Chrome, site) -> None:
    """The compare page's scatter: a point per query both systems scored, coloured by domain,
    each a link to its query."""
    compare = (site / "compare.html").resolve().as_uri() + "?a=bm25&b=jaccard-no-tok"
    page_text = open_until(browser, compare, ["Compare two systems", "Queries where they differ"])
    assert re.search(r"\d+ queries; mean ΔnDCG \(A − B\) -?\d\.\d{4}", page_text), page_text[:600]
    assert "paired randomization test p = " in page_text or "no paired test" in page_text
    link = browser.execute_script("return document.querySelector('#deltas a').getAttribute('href')")
    assert re.fullmatch(r"queries/\d+\.html", link)
    n = int(re.search(r"(\d+) queries; mean", page_text).group(1))
    sets = browser.execute_script(
        "const c = Chart.getChart(document.getElementById('scatter'));"
        "return c.data.datasets.filter(d => d.type !== 'line').map(d => [d.label, d.data.map(p => [p.x, p.y, p.page])])"
    )
    points = [p for _, data in sets for p in data]
    assert len(points) == n and all(re.fullmatch(r"queries/\d+\.html", p[2]) for p in points)
    assert len({label for label, _ in sets}) == len(sets) >= 1
    # a click on a point opens its query
    x, y, page = browser.execute_script(
        "const c = Chart.getChart(document.getElementById('scatter'));"
        "const i = c.data.datasets.findIndex(d => d.type !== 'line' && d.data.length);"
        "const p = c.getDatasetMeta(i).data[0], r = c.canvas.getBoundingClientRect();"
        "return [r.left + p.x, r.top + p.y, c.data.datasets[i].data[0].page];"
    )
    browser.execute_cdp_cmd("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
    for kind in ("mousePressed", "mouseReleased"):
        browser.execute_cdp_cmd(
            "Input.dispatchMouseEvent",
            {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
        )
    until(browser, lambda b: b.current_url.endswith(page), f"the point's query page {page}")


def ignore_stop_signals() -> None:
    """In the child before exec: SIGTERM and SIGINT ignored and blocked, as a shell's background
    job or a parent's busy thread can hand them on."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_saber_report_serves_the_explorer_and_stops_when_asked(tmp_path, stop):
    """`saber report --serve`: the paths, then the outputs folder on 127.0.0.1 (port 0: any),
    until a stop signal, which ends it at once even where its parent ignored and blocked it."""
    site = tmp_path / "home" / "sample" / "explorer"
    (site / "queries").mkdir(parents=True)
    (site / "index.html").write_text("<!doctype html><title>board</title>leaderboard here")
    env = {**os.environ, "SABER_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "saber_assets.cli", "report", "--serve", "--port", "0"]
    proc = subprocess.Popen(
        cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True,
        preexec_fn=ignore_stop_signals,
    )  # fmt: skip
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # type: ignore[union-attr]
        assert lines[0].startswith("report:") and "not built yet" in lines[0]
        assert lines[1].strip() == f"explorer: {site / 'index.html'}"
        url = lines[2].split()[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/explorer/index.html")
        assert b"leaderboard here" in urllib.request.urlopen(url, timeout=10).read()
        proc.send_signal(stop)
        # it stops, cleanly, when asked: the bound is generous (a loaded machine is slow), not
        # a measure of how fast
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read().strip() == "stopped"  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def kendall_tau_b(a: list[float], b: list[float]) -> float:
    """τ-b by counting pairs (ties in either list leave a pair neither concordant nor
    discordant and shrink the denominator)."""
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for k in range(i + 1, len(a)):
            x, y = a[i] - a[k], b[i] - b[k]
            concordant += x * y > 0
            discordant += x * y < 0
            ties_a += x == 0
            ties_b += y == 0
    n0 = len(a) * (len(a) - 1) / 2
    return (concordant - discordant) / ((n0 - ties_a) * (n0 - ties_b)) ** 0.5


def graded(home) -> dict[tuple[str, str], float]:
    bench = Benchmark.read(home / "evaluation_benchmark")
    doc = bench.documents["id"].to_list()
    return {
        (q, doc[c]): g
        for q, cands, grades in bench.queries.select(
            "id", "candidates", "relevance_scores"
        ).iter_rows()
        for c, g in zip(cands, grades, strict=True)
    }


def test_a_rebuild_with_fewer_rounds_says_what_moved(
    shared_build, tmp_path, monkeypatch, capsys, browser
):
    """`saber diff` between the tiny build and a rebuild that differs only in its tournament's
    rounds: the moved grades and each setting's τ are what a recomputation from the two builds'
    files finds; a build against itself moved nothing; the rebuilt explorer's What-changed page
    says the same. (The rounds, not the seed: a seed draws another corpus sample, and the
    rebuild of the sources, the annotations and the signals was half of this test's CPU.)"""
    before = shared_build("tiny").home / "tiny"
    cfg = shared_build("tiny").copy_to(tmp_path, monkeypatch)
    cfg.write_text(cfg.read_text().replace("rounds: 4", "rounds: 3"))
    assert main(["build", "--config", str(cfg)]) == 0
    after = tmp_path / "home" / "tiny"
    capsys.readouterr()
    assert main(["diff", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    old, new = graded(before), graded(after)
    both = old.keys() & new.keys()
    moved = sum(abs(old[k] - new[k]) > 1e-9 for k in both)
    assert f"grades: {moved} of {len(both)} moved" in out, out
    assert re.search(r'changed tournament: \{"rounds": 4, .* -> \{"rounds": 3, ', out), out
    taus = {}
    board_a, board_b = (pl.read_csv(h / "leaderboard" / "leaderboard.csv") for h in (before, after))
    for setting in sorted(set(board_a["setting"])):
        a = dict(
            board_a.filter(pl.col("setting") == setting).select("retriever", "ndcg@10").iter_rows()
        )
        b = dict(
            board_b.filter(pl.col("setting") == setting).select("retriever", "ndcg@10").iter_rows()
        )
        names = sorted(a.keys() & b.keys())
        taus[setting] = kendall_tau_b([a[n] for n in names], [b[n] for n in names])
        assert re.search(
            rf"board {setting}: Kendall τ {taus[setting]:.3f} over {len(names)} systems", out
        ), out
    capsys.readouterr()
    assert main(["diff", str(before), str(before)]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("nothing moved: the same queries, grades and board")
    )
    # the explorer kept the build it replaced and shows what changed since
    page_text = open_until(browser, (after / "explorer" / "diff.html").resolve().as_uri(),
                           ["What changed since the previous build", "The board"])  # fmt: skip
    assert f"{moved} of {len(both)} grades moved" in page_text
    for setting, tau in taus.items():
        assert f"{setting}: Kendall τ {tau:.3f}" in page_text
    assert re.search(r'tournament\s+\{"rounds":4,.*→\s+\{"rounds":3,', page_text), page_text[:1500]
