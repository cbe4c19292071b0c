"""A real Label Studio for the tests: its own environment (``.cache/label-studio``, made by
``.ci/run`` from ``deploy/label-studio/requirements.txt``), SQLite in a fresh data folder, on
127.0.0.1, with its version check, analytics and error reporting off and every outbound request
sent to a dead proxy, so nothing can be fetched; annotators join through an invite link, as
people do, and get their own API tokens."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx

from saber_assets.config import REPO_ROOT

ENV_BIN = REPO_ROOT / ".cache" / "label-studio" / "bin" / "label-studio"


def label_studio_bin() -> str | None:
    """The label-studio executable: $LABEL_STUDIO_BIN, the project's environment, or PATH."""
    given = os.environ.get("LABEL_STUDIO_BIN")
    if given:
        return given
    return str(ENV_BIN) if ENV_BIN.exists() else shutil.which("label-studio")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabelStudioServer:
    """``template``: a migrated data folder (``migrated_template``) copied into ``data_dir`` first,
    so that the server starts in seconds instead of migrating an empty database for a minute."""

    ADMIN, PASSWORD, TOKEN = "lead@example.com", "lead-password-1", "saber0test0token0lead"

    def __init__(
        self, data_dir: Path, timeout_s: float = 300, template: Path | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        self.log = data_dir / "label-studio.log"
        if template is not None:
            shutil.copytree(template, data_dir, dirs_exist_ok=True)
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
            "LATEST_VERSION_CHECK": "false",
            "COLLECT_ANALYTICS": "false",
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
            # anything that tries the network goes to a closed port, and fails
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        cmd = [label_studio_bin(), "start", "--no-browser", "--data-dir", str(data_dir),
               "--internal-host", "127.0.0.1", "--port", str(self.port),
               "--username", self.ADMIN, "--password", self.PASSWORD,
               "--user-token", self.TOKEN, "--enable-legacy-api-token"]  # fmt: skip
        started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd, env=env, cwd=data_dir, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() - started > timeout_s:
                self.stop()
                raise RuntimeError(
                    f"Label Studio did not start in {timeout_s:.0f}s: {self.log.read_text()[-2000:]}"
                )
            time.sleep(1)
        self.start_s = time.monotonic() - started

    def invite(self, email: str, password: str) -> str:
        """Sign a new annotator up through the organisation's invite link; their API token."""
        link = httpx.get(
            f"{self.url}/api/invite", headers={"Authorization": f"Token {self.TOKEN}"}
        ).json()["invite_url"]
        with httpx.Client(base_url=self.url, follow_redirects=False, timeout=30) as web:
            web.get(link)
            r = web.post(
                link,
                data={"csrfmiddlewaretoken": web.cookies["csrftoken"], "email": email,
                      "password": password, "how_find_us": "", "allow_newsletters": "false"},
                headers={"Referer": f"{self.url}{link}"},
            )  # fmt: skip
            if r.status_code != 302:
                raise RuntimeError(f"signup of {email} failed: {r.status_code} {r.text[:300]}")
            return web.get("/api/current-user/token").json()["token"]

    def outbound_requests(self) -> list[str]:
        """Lines of the server's log where it opened a connection to another host."""
        text = self.log.read_text(errors="replace")
        return re.findall(r".*Starting new HTTPS? connection.*", text)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()


def migrated_template() -> Path:
    """A data folder whose database Label Studio has migrated and in which the lead's account
    exists, made once per Label Studio install on this machine (keyed by its pinned
    requirements; `.ci/run` makes it with the environment) under ``.cache/label-studio-db``."""
    import hashlib

    from filelock import FileLock

    pins = (REPO_ROOT / "deploy" / "label-studio" / "requirements.txt").read_bytes()
    key = hashlib.blake2b(pins, digest_size=8).hexdigest()
    root = REPO_ROOT / ".cache" / "label-studio-db"
    root.mkdir(parents=True, exist_ok=True)
    done = root / key
    with FileLock(str(root / f"{key}.lock")):
        if not done.exists():
            scratch = root / f"{key}.partial"
            shutil.rmtree(scratch, ignore_errors=True)
            LabelStudioServer(scratch).stop()
            (scratch / "label-studio.log").unlink()
            scratch.rename(done)  # whole or not at all
    return done


if __name__ == "__main__":
    print(migrated_template())
