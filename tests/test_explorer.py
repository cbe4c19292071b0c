"""The benchmark explorer in a real browser: the site the tiny build wrote, opened from file://
in headless Chromium, read by what it renders (not its HTML source)."""

from __future__ import annotations

import re
import time

import pytest

from .browser import CHROMIUM, Browser

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)"
)


def set_select(browser: Browser, element: str, value: str) -> None:
    browser.evaluate(
        f"(() => {{ const s = document.getElementById({element!r}); s.value = {value!r};"
        " s.dispatchEvent(new Event('change')); })()"
    )
    time.sleep(0.3)


def board_rows(browser: Browser) -> list[list[str]]:
    return browser.evaluate(
        "[...document.querySelectorAll('#board tbody tr.board-row')]"
        ".map(tr => [...tr.children].map(td => td.innerText.trim()))"
    )


def test_the_explorer_shows_the_board_a_query_and_a_comparison(shared_build, tmp_path):
    site = shared_build("tiny").home / "tiny" / "explorer"
    index = (site / "index.html").resolve().as_uri()
    browser = Browser(tmp_path / "chromium-profile")
    try:
        text = browser.open_until(index, ["Leaderboard", "tie group", "Domains", "Downloads"])
        rows = board_rows(browser)
        assert rows and all(re.fullmatch(r"T\d+", r[0]) for r in rows), rows  # tie groups drawn
        assert all(re.search(r"\(n=\d+\)", r[3]) for r in rows), rows  # each cell's queries
        # the judge's noise beside the query-only interval: its interval, share and rank
        head = browser.evaluate("document.querySelector('#board thead').innerText")
        assert "95% CI, + judge" in head and "judge share" in head and "rank, + judge" in head
        assert all(re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]", r[5]) for r in rows), rows
        assert "leaderboard.csv" in text and "queries (" in text
        # sort: the score column ascending, then descending again
        first = [r[1] for r in rows]
        browser.evaluate(
            "[...document.querySelectorAll('#board th button')]"
            ".find(b => b.innerText.startsWith('ndcg@10')).click()"
        )
        time.sleep(0.3)
        assert [r[1] for r in board_rows(browser)] == first[::-1] or len(set(first)) == 1
        # filter a domain: the score column becomes that domain's, with its own query count
        domain = browser.evaluate("document.getElementById('domain').options[1].value")
        set_select(browser, "domain", domain)
        head = browser.evaluate("document.querySelector('#board thead').innerText")
        assert f"{domain} nDCG" in head, head
        filtered = board_rows(browser)  # the domain's own interval beside its score
        assert all(re.fullmatch(r"\[\d\.\d{3}, \d\.\d{3}\]|", r[4]) for r in filtered), filtered
        assert any(r[4] for r in filtered), filtered
        # a row's provenance on click
        browser.evaluate("document.querySelector('#board tbody tr.board-row').click()")
        time.sleep(0.3)
        assert "Provenance — " in browser.text() and "row_id:" in browser.text()

        # a query's page: problem, candidates in their groups, its judgments, the retrievers
        page = (site / "queries" / "0.html").resolve().as_uri()
        text = browser.open_until(page, ["Problem", "Candidates", "Judgments (", "nDCG@10"])
        assert "topic-only (" in text and "summary-only (" in text and "both (" in text
        judgments = browser.evaluate("document.querySelectorAll('table.judgments tbody tr').length")
        assert judgments > 0
        assert "shown first" in text and "wins–losses" in text

        # two systems compared query by query, each query linking to its page
        compare = (site / "compare.html").resolve().as_uri() + "?a=bm25&b=jaccard-no-tok"
        text = browser.open_until(compare, ["Compare two systems", "Queries where they differ"])
        assert re.search(r"\d+ queries; mean ΔnDCG \(A − B\) -?\d\.\d{4}", text), text[:600]
        assert "paired randomization test p = " in text or "no paired test" in text
        link = browser.evaluate("document.querySelector('#deltas a').getAttribute('href')")
        assert re.fullmatch(r"queries/\d+\.html", link)
    finally:
        browser.close()


def test_saber_report_serves_the_explorer_on_localhost(tmp_path):
    """`saber report --serve`: the paths, then the outputs folder on 127.0.0.1 (port 0: any)."""
    import os
    import subprocess
    import sys
    import urllib.request

    from saber_assets.config import REPO_ROOT

    site = tmp_path / "home" / "sample" / "explorer"
    (site / "queries").mkdir(parents=True)
    (site / "index.html").write_text("<!doctype html><title>board</title>leaderboard here")
    env = {**os.environ, "SABER_HOME": str(tmp_path / "home")}
    cmd = [sys.executable, "-m", "saber_assets.cli", "report", "--serve", "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # type: ignore[union-attr]
        assert lines[0].startswith("report:") and "not built yet" in lines[0]
        assert lines[1].strip() == f"explorer: {site / 'index.html'}"
        url = lines[2].split()[1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/explorer/index.html")
        assert b"leaderboard here" in urllib.request.urlopen(url, timeout=10).read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
