"""A small OpenAI-compatible server on 127.0.0.1 for tests: canned answers and scripted faults."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_body(
    content: str,
    top_logprobs: dict[str, float] | None = None,
    finish_reason: str = "stop",
    tokens: list[tuple[str, dict[str, float]]] | None = None,
) -> dict:
    choice: dict = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": finish_reason,
    }
    if tokens is not None:  # every generated token with its alternatives
        choice["logprobs"] = {
            "content": [
                {
                    "token": tok,
                    "logprob": alts.get(tok, -0.01),
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in alts.items()],
                }
                for tok, alts in tokens
            ]
        }
    elif top_logprobs is not None:
        first = max(top_logprobs, key=top_logprobs.get)
        choice["logprobs"] = {
            "content": [
                {
                    "token": first,
                    "logprob": top_logprobs[first],
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top_logprobs.items()],
                }
            ]
        }
    return {"id": "x", "object": "chat.completion", "choices": [choice]}


PAPER_REASONING = """Step 1. Target: tags number theory, modular arithmetic; tools: Fermat's little
theorem; moves: reduce modulo 3, check residues, conclude. Sample 1: same tools and moves.
Sample 2: tags algebra; tools: factoring; moves: expand, factor, compare. (\\boxed{2} would be
wrong here.)
Step 2. Sample 1 shares the main technique; sample 2 only shares surface words.
Step 3. Sample 1."""


CORE_IDEA = {
    "has_core_idea": True,
    "core_idea": "Apply the pigeonhole principle to the residues.",
    "supporting_ideas": ["reduce modulo n"],
    "keywords": ["pigeonhole", "residues"],
    "confidence": 0.9,
}


def topic_labels(body: dict, user: str) -> list[str]:
    """The topics a request asks about: its JSON schema's keys where it sends one (exact, a
    title with a comma included), else the prompt's comma-separated list."""
    schema = (body.get("structured_outputs") or {}).get("json") or (
        (body.get("response_format") or {}).get("json_schema") or {}
    ).get("schema")
    if schema:
        return list(schema["properties"]["scores"]["properties"])
    return re.search(r"Candidate topics: (.+)", user).group(1).split(", ")


IDEA_WORDS = ("induction parity pigeonhole invariant symmetry coloring bijection telescoping "
              "substitution modular extremal counting").split()  # fmt: skip


def _draw(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big")


def varied_answer(body: dict) -> tuple[int, str | dict]:
    """Answers that differ by problem, drawn from the prompt's text, like a model that reads it:
    topic scores per (kind of problem, topic), the problems falling into three kinds that each
    take their own path down the ontology below Algebra; a core idea of three words from ``IDEA_WORDS``; a
    judge's 1 or 2 per pair. The same prompt always gets the same answer."""
    user = body["messages"][-1]["content"]
    if "Candidate topics:" in user:
        labels = topic_labels(body, user)
        kind = _draw(user.split("Candidate topics:")[0]) % 3
        scores = {lab: (_draw(f"{kind}|{lab}") % 101) / 100 for lab in labels}
        if {"Algebra", "Geometry"} <= set(scores):  # the root: every problem is an algebra one
            scores = {lab: float(lab == "Algebra") for lab in labels}
        return 200, chat_body(json.dumps({"scores": scores}))
    if "core idea" in user:
        h = _draw(user)
        words = [IDEA_WORDS[(h >> (4 * k)) % len(IDEA_WORDS)] for k in range(3)]
        idea = f"Use {words[0]} with {words[1]} and {words[2]}."
        return 200, chat_body(json.dumps({**CORE_IDEA, "core_idea": idea}))
    if "Answer with 1 or 2" in user:
        return 200, chat_body(str(1 + _draw(user) % 2))
    return default_answer(body)


def default_answer(body: dict) -> tuple[int, str | dict]:
    """Answer each task like a (very simple) model would."""
    user = body["messages"][-1]["content"]
    if "Candidate topics:" in user:
        labels = topic_labels(body, user)
        return 200, chat_body(
            json.dumps({"scores": {lab: (1.0 if i == 0 else 0.0) for i, lab in enumerate(labels)}})
        )
    if "core idea" in user:
        return 200, chat_body(json.dumps(CORE_IDEA))
    if "Answer with 1 or 2" in user:
        return 200, chat_body("1")
    if "\\boxed{1} or \\boxed{2}" in user:
        return 200, chat_body(PAPER_REASONING + "\n\\boxed{1}")
    if "score as \\boxed{N}" in user:
        return 200, chat_body("Both reduce modulo a prime; the shapes differ.\n\\boxed{60}")
    if "Answer Yes or No" in user:
        return 200, chat_body("Yes", {"Yes": -0.2, "No": -1.7, "Maybe": -5.0})
    return 400, {"error": "unknown task"}


class FakeOpenAI:
    """Start with ``with FakeOpenAI() as srv``; ``srv.url`` is the base URL (…/v1).

    ``faults`` is a list consumed one per request: "500", "401", "timeout", "malformed" or None
    (answer). ``answer`` may be replaced to script the content; ``models`` is what
    ``GET /v1/models`` lists (a list of ids or of model cards; change it between calls).
    """

    def __init__(
        self,
        answer: Callable[[dict], tuple[int, str | dict]] = default_answer,
        faults: list | None = None,
        delay_s: float = 2.0,
        models: list | None = None,
    ):
        self.answer = answer
        self.models = list(models or [])
        self.faults = list(faults or [])
        self.delay_s = delay_s
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _fault(self, body) -> bool:
                with outer.lock:
                    outer.requests.append(
                        {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                    )
                    fault = outer.faults.pop(0) if outer.faults else None
                if fault == "timeout":
                    time.sleep(outer.delay_s)
                if fault == "500":
                    self._send(500, b'{"error": "boom"}')
                elif fault == "401":
                    self._send(401, b'{"error": {"message": "invalid api key"}}')
                elif fault == "malformed":
                    self._send(200, b'{"choices": [ {"message": ')
                return fault in ("500", "401", "malformed")

            def do_GET(self):
                if self._fault(None):
                    return
                if not self.path.endswith("/models"):
                    return self._send(404, b'{"error": "not found"}')
                cards = [m if isinstance(m, dict) else {"id": m, "object": "model"}
                         for m in outer.models]  # fmt: skip
                self._send(200, json.dumps({"object": "list", "data": cards}).encode())

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self._fault(body):
                    return
                status, payload = outer.answer(body)
                data = payload if isinstance(payload, str) else json.dumps(payload)
                self._send(status, data.encode())

            def _send(self, status: int, data: bytes):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
