"""A fault-injecting HTTP proxy for rehearsals: it stands between saber and an OpenAI-compatible
server (a real one, or the tests' fake) and, at a seeded rate, answers a request with one of the
faults a long build meets instead of forwarding it faithfully.

Faults (``FAULTS``): the connection reset before the request is read and after it is read,
HTTP 500 and 503, 429 with ``Retry-After``, a stall past the client's timeout, a body cut off
mid-JSON, a 200 with an HTML page, a 200 with JSON of the wrong shape, and a slow but correct
stream. Which request meets which fault is drawn from the seed, the request's body and how
many times that body has been seen, so a rehearsal faults the same requests in the same way
whatever the order in which concurrent requests arrive, and a retried request draws again.
Every request is logged (``log``: forwarded or the fault met).

    with FaultProxy("http://127.0.0.1:8000", rate=0.1, seed=1) as proxy:
        ...  # point llm.base_url at proxy.url + "/v1"
    proxy.counts()  # {"forwarded": ..., "http_500": ..., ...}
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import httpx

UPSTREAM_FAILED = 502  # what the client gets when the server could not be reached

# faults whose request reached the server (its work done, the answer lost or slow on the way)
REACH_UPSTREAM = ("reset_after_read", "truncated_body", "slow_stream")
FAULTS = (
    "reset_before_read",
    "reset_after_read",
    "http_500",
    "http_503",
    "http_429",
    "stall",
    "truncated_body",
    "html_200",
    "wrong_shape_200",
    "slow_stream",
)


@dataclass
class FaultProxy:
    upstream: str  # the server's root, e.g. http://127.0.0.1:8000
    rate: float = 0.1  # the share of requests that meet a fault
    seed: int = 0
    # the faults' relative weights (default: all equal)
    mix: Mapping[str, float] | None = None
    stall_s: float = 5.0  # longer than the client's timeout in a rehearsal
    # at most this many faults per identical request (then it is forwarded): None, no limit
    max_per_request: int | None = None
    retry_after_s: int = 1
    slow_chunk_s: float = 0.05
    log: list[dict] = field(default_factory=list)
    _seen: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        weights = dict(self.mix) if self.mix is not None else dict.fromkeys(FAULTS, 1.0)
        unknown = set(weights) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)} (known: {', '.join(FAULTS)})")
        if not 0 <= self.rate <= 1:
            raise ValueError(f"fault rate {self.rate} is not in [0, 1]")
        total = sum(weights.values())
        self._faults = [(f, w / total) for f, w in weights.items() if w > 0]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---------------------------------------------------------------- what each request meets

    def draw(self, body: bytes) -> str | None:
        """The fault this request meets (None: forwarded as it is), from the seed, the body and
        how many times the body has been seen."""
        with self._lock:
            self._seen[body] += 1
            nth = self._seen[body]
        h = hashlib.blake2b(f"{self.seed}|{nth}|".encode() + body, digest_size=8).digest()
        u = int.from_bytes(h[:4], "big") / 2**32
        if u >= self.rate or (self.max_per_request is not None and nth > self.max_per_request):
            return None
        v = int.from_bytes(h[4:], "big") / 2**32
        acc = 0.0
        for fault, share in self._faults:
            acc += share
            if v < acc:
                return fault
        return self._faults[-1][0]

    def counts(self) -> dict[str, int]:
        """Requests by what they met: ``forwarded`` or a fault's name."""
        with self._lock:
            return dict(Counter(e["event"] for e in self.log))

    def _record(self, event: str, path: str, body: bytes) -> None:
        digest = hashlib.blake2b(body, digest_size=8).hexdigest() if body else None
        with self._lock:
            self.log.append({"event": event, "path": path, "body": digest, "t": time.time()})

    # ------------------------------------------------------------------------------ serving

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                size = int(headers.get("content-length", "0"))
                body = await reader.readexactly(size) if size else b""
                fault = self.draw(method.encode() + b" " + path.encode() + b"\n" + body)
                if not await self._answer(writer, method, path, headers, body, fault):
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _answer(self, writer, method, path, headers, body, fault) -> bool:
        """Answer one request; False when the connection is finished."""
        if fault is not None:
            self._record(fault, path, body)
        if fault == "reset_before_read":
            # dropped before the server saw it (an RST, not a FIN): no answer
            writer.transport.abort()
            return False
        if fault == "reset_after_read":
            # the server did the work; its answer is lost on the way back
            await self._forward(method, path, headers, body)
            writer.transport.abort()
            return False
        if fault == "stall":
            await asyncio.sleep(self.stall_s)
            writer.transport.abort()
            return False
        if fault in ("http_500", "http_503"):
            code = int(fault[-3:])
            await self._send(writer, code, b'{"error": {"message": "injected"}}')
            return True
        if fault == "http_429":
            await self._send(
                writer, 429, b'{"error": {"message": "rate limited"}}',
                extra={"Retry-After": str(self.retry_after_s)},
            )  # fmt: skip
            return True
        if fault == "html_200":
            page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
            await self._send(writer, 200, page, content_type="text/html")
            return True
        if fault == "wrong_shape_200":
            await self._send(writer, 200, json.dumps({"object": "list", "data": []}).encode())
            return True
        status, payload, ctype = await self._forward(method, path, headers, body)
        if fault is None:  # the server's own failure is its own entry, not a faithful forward
            self._record("forwarded" if status != UPSTREAM_FAILED else "upstream_error", path, body)
        if fault == "truncated_body":
            # the promised length, half the bytes, then the connection ends
            head = self._head(status, len(payload), ctype)
            writer.write(head + payload[: len(payload) // 2])
            await writer.drain()
            writer.transport.abort()
            return False
        if fault == "slow_stream":
            writer.write(self._head(status, len(payload), ctype))
            step = max(1, len(payload) // 8)
            for k in range(0, len(payload), step):
                writer.write(payload[k : k + step])
                await writer.drain()
                await asyncio.sleep(self.slow_chunk_s)
            return True
        await self._send(writer, status, payload, content_type=ctype)
        return True

    async def _forward(self, method, path, headers, body) -> tuple[int, bytes, str]:
        keep = {k: v for k, v in headers.items() if k in ("authorization", "content-type")}
        try:
            resp = await self._client.request(
                method, self.upstream + path, content=body, headers=keep
            )
        except httpx.HTTPError as exc:
            error = json.dumps({"error": {"message": f"upstream: {exc}"}}).encode()
            return UPSTREAM_FAILED, error, "application/json"
        return resp.status_code, resp.content, resp.headers.get("content-type", "application/json")

    @staticmethod
    def _head(
        status: int, length: int, ctype: str, extra: Mapping[str, str] | None = None
    ) -> bytes:
        lines = [f"HTTP/1.1 {status} X", f"Content-Type: {ctype}", f"Content-Length: {length}"]
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _send(self, writer, status, payload, content_type="application/json", extra=None):
        writer.write(self._head(status, len(payload), content_type, extra) + payload)
        await writer.drain()

    # ------------------------------------------------------------------------------ lifecycle

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            # a fresh connection per forward: an HTTP/1.0 server closes each one, and a pooled
            # connection it closed would fail a forward for nothing
            self._client = httpx.AsyncClient(
                timeout=None, limits=httpx.Limits(max_keepalive_connections=0)
            )
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", 0)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._client.aclose())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        """Stop serving; a request in flight (a stall) is cancelled, not left to a closed loop."""
        if self._loop is None:
            return
        loop = self._loop

        async def shut() -> None:
            self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            loop.stop()

        loop.call_soon_threadsafe(lambda: loop.create_task(shut()))
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
