"""Debian's chromium in the browser tests, driven by Selenium through Debian's chromium-driver.

The driver speaks W3C WebDriver and is built from the same source package as the browser, so
whatever Chromium apt gives today, its driver is the same version. Both paths are given to
Selenium, so Selenium Manager never looks for (or downloads) a browser or a driver.

A test asks for the ``chromium`` fixture (tests/conftest.py): it is skipped, naming the missing
Debian package, where either is absent, and fails with the driver's own error where they are
present but the browser cannot be started.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

PACKAGES = {"chromium": "chromium", "chromedriver": "chromium-driver"}  # command -> package

# A fresh profile, no sandbox (the tests run as root), and none of Chromium's own traffic: this
# machine's closed network refuses it, many connections at a time.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--window-size=1600,1000"]  # fmt: skip


def missing() -> str | None:
    """Why the browser tests cannot run here (naming the Debian packages to install), or None."""
    absent = [pkg for cmd, pkg in PACKAGES.items() if shutil.which(cmd) is None]
    if not absent:
        return None
    return f"needs Debian's {' and '.join(absent)} (`apt-get install {' '.join(absent)}`; .ci/run installs them)"


def start(profile: Path, binary: str | None = None) -> webdriver.Chrome:
    """Headless Chromium on the fresh profile folder ``profile``; ``binary`` replaces apt's
    browser. A browser that cannot start raises the driver's ``SessionNotCreatedException``."""
    options = webdriver.ChromeOptions()
    options.binary_location = binary or shutil.which("chromium") or "chromium"
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    service = Service(executable_path=shutil.which("chromedriver") or "chromedriver")
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(120)
    driver.set_script_timeout(60)
    return driver


def text(driver: webdriver.Chrome) -> str:
    """The page's rendered text (what a person reads, not its HTML)."""
    return driver.execute_script("return document.body ? document.body.innerText : ''") or ""


def open_until(
    driver: webdriver.Chrome, url: str | None, wanted: list[str], timeout_s: float = 90
) -> str:
    """Navigate to ``url`` (None: stay), then wait until every string in ``wanted`` is rendered;
    the rendered text. An ``AssertionError`` names what never appeared and what the page said."""
    if url is not None:
        driver.get(url)
    try:
        WebDriverWait(driver, timeout_s, poll_frequency=0.5).until(
            lambda d: all(w in text(d) for w in wanted)
        )
    except TimeoutException:
        seen = text(driver)
        missing_ = [w for w in wanted if w not in seen]
        raise AssertionError(
            f"{url or driver.current_url}: {missing_} never rendered in {timeout_s:.0f} s; "
            f"page says {seen[:1500]!r}"
        ) from None
    return text(driver)


def buttons(driver: webdriver.Chrome) -> list[str]:
    return driver.execute_script(
        "return [...document.querySelectorAll('button')].map(b => b.innerText.trim())"
    )


def click(driver: webdriver.Chrome, text_: str, find: str) -> None:
    """Run ``find`` (JS: the element to click, or null, given ``want`` = ``text_``) and click
    what it found; an ``AssertionError`` naming the page's buttons if it found nothing."""
    element = driver.execute_script(f"const want = arguments[0]; return ({find});", text_)
    if element is None:
        raise AssertionError(f"no button {text_!r}; buttons: {buttons(driver)}")
    driver.execute_script("arguments[0].click()", element)


def click_text(driver: webdriver.Chrome, text_: str) -> None:
    """Click the (last) button, menu item or link whose text is ``text_``."""
    click(
        driver,
        text_,
        "[...document.querySelectorAll('button, [role=menuitem], a')]"
        ".filter(b => b.innerText.trim() === want).pop() ?? null",
    )


def click_after(driver: webdriver.Chrome, text_: str) -> None:
    """Click the button right after the one whose text starts with ``text_`` (a split button's
    dropdown)."""
    click(
        driver,
        text_,
        "(bs => { const i = bs.findIndex(b => b.innerText.trim().startsWith(want));"
        " return i < 0 ? null : bs[i + 1] ?? null; })([...document.querySelectorAll('button')])",
    )


def screenshot(driver: webdriver.Chrome, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not driver.save_screenshot(str(path)):
        raise AssertionError(f"the driver could not write a screenshot to {path}")
