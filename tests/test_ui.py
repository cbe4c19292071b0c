"""The Dagster UI, as a user sees it: after a build, headless Chromium opens the asset graph and
the leaderboard's page and reads the rendered DOM over the DevTools protocol."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from saber_assets.cli import main
from saber_assets.settings import REPO_ROOT

from .dagster_dev import dagster_dev

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (.ci/run installs it)"
)
SCREENSHOTS = REPO_ROOT / ".saber" / "screenshots"


class Browser:
    """Headless Chromium on a fresh profile, driven over one DevTools websocket."""

    def __init__(self, profile: Path):
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--window-size=1600,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list").read())
        page = next(t for t in targets if t["type"] == "page")
        import websocket

        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60)
        self.next_id = 0

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def text(self) -> str:
        got = self.call(
            "Runtime.evaluate", expression="document.body.innerText", returnByValue=True
        )
        return got["result"].get("value") or ""

    def open_until(self, url: str, wanted: list[str], timeout_s: float = 90) -> str:
        """Navigate, then poll the rendered text until every wanted string is on the page."""
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text()
            if all(w in text for w in wanted):
                # Dagster's "join the community" dialog covers a fresh profile's first page
                self.call(
                    "Runtime.evaluate",
                    expression="[...document.querySelectorAll('button')]"
                    ".find(b => b.innerText.trim() === 'Skip')?.click()",
                )
                time.sleep(0.5)
                return text
            if time.monotonic() > deadline:
                missing = [w for w in wanted if w not in text]
                raise AssertionError(f"{url}: {missing} never rendered; page says {text[:1500]!r}")
            time.sleep(1)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self.ws.close()
        self.proc.kill()
        self.proc.wait()


def test_ui_shows_the_asset_graph_and_the_leaderboard(tiny_config, tmp_path):
    cfg = tiny_config()
    assert main(["build", "--config", str(cfg)]) == 0
    home = tmp_path / "home"
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster_home"), "SABER_CONFIG": str(cfg)}
    with dagster_dev(env, tmp_path / "dagster_dev.log") as url:
        browser = Browser(tmp_path / "chromium-profile")
        try:
            # the global lineage: one box per stage group
            groups = ["corpus", "ontology", "annotations", "signals", "candidates",
                      "tournament", "ratings", "leaderboard", "analyses"]  # fmt: skip
            graph = browser.open_until(f"{url}/asset-groups", groups)
            assert "Global asset lineage" in graph
            browser.screenshot(SCREENSHOTS / "asset-graph.png")
            # the leaderboard's page: its latest materialization's table and chart metadata
            browser.open_until(
                f"{url}/assets/leaderboard",
                ["judge_backend", "table", "chart", "ndcg@10", "bm25", "jaccard-no-tok"],
            )
            browser.screenshot(SCREENSHOTS / "leaderboard.png")
        finally:
            browser.close()
    shot = SCREENSHOTS / "leaderboard.png"
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:4] == b"\x89PNG"
