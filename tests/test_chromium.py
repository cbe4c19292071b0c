"""The browser tests' driver (tests/chromium.py): a skip that names the Debian package, a browser
that cannot start failing at once with the driver's own error, and a page read as rendered."""

from __future__ import annotations

import shutil
import time

import pytest
from selenium.common.exceptions import SessionNotCreatedException

from . import chromium


@pytest.mark.parametrize(
    ("absent", "named"),
    [({"chromium"}, "chromium ("), ({"chromedriver"}, "chromium-driver"),
     ({"chromium", "chromedriver"}, "chromium and chromium-driver")],
)  # fmt: skip
def test_the_skip_names_the_debian_package_that_is_missing(monkeypatch, absent, named):
    monkeypatch.setattr(shutil, "which", lambda cmd: None if cmd in absent else f"/usr/bin/{cmd}")
    reason = chromium.missing()
    assert reason is not None and named in reason and "apt-get install" in reason, reason
    monkeypatch.setattr(shutil, "which", lambda cmd: f"/usr/bin/{cmd}")
    assert chromium.missing() is None


def test_a_browser_that_cannot_start_fails_at_once_with_the_drivers_error(tmp_path):
    if reason := chromium.missing():
        pytest.skip(reason)
    started = time.monotonic()
    with pytest.raises(SessionNotCreatedException, match="session not created"):
        chromium.start(tmp_path / "profile", binary="/bin/false")
    assert time.monotonic() - started < 30  # the driver's answer, not a wait for a port


def test_the_driver_reads_the_rendered_page_and_clicks(browser, tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        "<!doctype html><button onclick=\"document.getElementById('out').textContent ="
        " 'clicked ' + (2 + 3)\">Go</button><p id=out></p><script>document.body.append("
        "'drawn by script')</script>"
    )
    assert "drawn by script" in chromium.open_until(browser, page.as_uri(), ["Go"])
    chromium.click_text(browser, "Go")
    assert "clicked 5" in chromium.open_until(browser, None, ["clicked"], 5)
    with pytest.raises(AssertionError, match=r"no button 'Stop'; buttons: \['Go'\]"):
        chromium.click_text(browser, "Stop")
    with pytest.raises(AssertionError, match=r"\['never'\] never rendered"):
        chromium.open_until(browser, None, ["never"], 1)
    shot = tmp_path / "shot.png"
    chromium.screenshot(browser, shot)
    assert shot.read_bytes()[:4] == b"\x89PNG"
    print(f"driven: Chromium {browser.capabilities['browserVersion']}")
