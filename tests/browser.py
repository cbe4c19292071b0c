"""Headless Chromium driven over the DevTools protocol (Debian's chromium; never a download)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


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
        return self.evaluate("document.body.innerText") or ""

    def open_until(self, url: str | None, wanted: list[str], timeout_s: float = 90) -> str:
        """Navigate (``url`` None: stay), then poll the rendered text until every wanted string
        is on the page."""
        if url is not None:
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

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)[
            "result"
        ].get("value")

    def buttons(self) -> list[str]:
        return self.evaluate(
            "[...document.querySelectorAll('button')].map(b => b.innerText.trim())"
        )

    def click(self, text: str, find: str) -> None:
        """Run ``find`` (JS: the element to click, or null, given ``want`` = ``text``) and click
        what it found; an error naming the page's buttons if it found nothing."""
        found = self.evaluate(
            f"(() => {{ const want = {json.dumps(text)}; const el = ({find});"
            " if (!el) return false; el.click(); return true; })()"
        )
        if not found:
            raise AssertionError(f"no button {text!r}; buttons: {self.buttons()}")

    def click_text(self, text: str) -> None:
        """Click the (last) button or menu item whose text is ``text``."""
        self.click(
            text,
            "[...document.querySelectorAll('button, [role=menuitem], a')]"
            ".filter(b => b.innerText.trim() === want).pop()",
        )

    def click_after(self, text: str) -> None:
        """Click the button right after the one whose text starts with ``text`` (a split
        button's dropdown)."""
        self.click(
            text,
            "(bs => { const i = bs.findIndex(b => b.innerText.trim().startsWith(want));"
            " return i < 0 ? null : bs[i + 1]; })([...document.querySelectorAll('button')])",
        )

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        self.ws.close()
        self.proc.kill()
        self.proc.wait()
