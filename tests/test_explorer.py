"""The benchmark explorer in a real browser: the site the tiny build wrote, opened from file://
in headless Chromium, read by what it renders (not its HTML source)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.support.ui import WebDriverWait

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

    # a query's page: problem, candidates in their groups, its judgments, the retrievers
    page = (site / "queries" / "0.html").resolve().as_uri()
    page_text = open_until(browser, page, ["Problem", "Candidates", "Judgments (", "nDCG@10"])
    assert "topic-only (" in page_text and "summary-only (" in page_text
    assert "both (" in page_text
    judgments = browser.execute_script(
        "return document.querySelectorAll('table.judgments tbody tr').length"
    )
    assert judgments > 0
    assert "shown first" in page_text and "wins–losses" in page_text

    # two systems compared query by query, each query linking to its page
    compare = (site / "compare.html").resolve().as_uri() + "?a=bm25&b=jaccard-no-tok"
    page_text = open_until(browser, compare, ["Compare two systems", "Queries where they differ"])
    assert re.search(r"\d+ queries; mean ΔnDCG \(A − B\) -?\d\.\d{4}", page_text), page_text[:600]
    assert "paired randomization test p = " in page_text or "no paired test" in page_text
    link = browser.execute_script("return document.querySelector('#deltas a').getAttribute('href')")
    assert re.fullmatch(r"queries/\d+\.html", link)


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
        sent = time.monotonic()
        proc.send_signal(stop)
        assert proc.wait(timeout=2) == 0
        assert time.monotonic() - sent < 2
        assert proc.stdout.read().strip() == "stopped"  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()
