"""saber's LLM client against a plain concurrent loop, on the same real server and requests.

    uv run python perf/llm_client.py                 # 48 requests per level, 1/4/16 in flight
    uv run python perf/llm_client.py --n 96 --task topics

The server is llama.cpp's ``llama-server`` with the bundled SmolLM2-135M-Instruct
(``saber llm-server --prepare`` builds it), started here with 16 slots so that it can hold 16
requests at once. For each concurrency level the same requests (distinct bundled problems, so
no prompt cache is shared between them) go through:

- ``plain``: ``httpx.AsyncClient`` + ``asyncio.Semaphore(k)`` posting the very bodies saber
  would send and reading ``choices[0].message.content`` and ``usage`` — the least a client can do;
- ``saber``: ``OpenAIBackend.generate`` (retries, parsing of log-probabilities, usage, the
  in-flight counter), configured with ``max_concurrency = k``.

The two alternate, ``--repeats`` times each, so that a slow patch of the machine hits both; the
median of each is compared. Printed per level: requests/s and generated tokens/s of each, and
saber / plain. The client is never the bottleneck when the ratio is ≥ 0.9 at every level.

Measured on the 2-core box (the server's default prompt cache on, so it is at its fastest and a
slow client would show most): 64 direct-judge requests, median of 5 — saber / plain 1.012 at 1,
0.959 at 4, 1.015 at 16 in flight (29–48 req/s); 32 topic requests (JSON schema), median of 3 —
0.963, 0.999, 1.007 (1.8–2.5 req/s, 85–120 tokens/s). The server is the bottleneck throughout.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import time
from pathlib import Path

import httpx

from saber_resources.llama_server import LlamaServer, bundled_model, server_binary
from saber_resources.llm import LLMRequest, OpenAIBackend
from saber_resources.prompts import judge_request, topic_request

REPO = Path(__file__).resolve().parent.parent


def problems(n: int) -> list[str]:
    out = []
    with gzip.open(REPO / "data" / "corpora" / "math.jsonl.gz", "rt") as f:
        for line in f:
            row = json.loads(line)
            if len(row["problem"]) < 500:
                out.append(row["problem"])
            if len(out) == n + 2:
                return out
    return out


def requests_for(task: str, n: int) -> list[LLMRequest]:
    texts = problems(n)
    if task == "judge":  # the direct judge: a long prompt, a one-digit answer
        return [judge_request(texts[i], texts[i + 1], texts[i + 2]) for i in range(n)]
    labels = ["Algebra", "Geometry", "Number Theory", "Combinatorics", "Calculus and Analysis"]
    return [topic_request(t, labels) for t in texts[:n]]


async def plain(url: str, bodies: list[dict], k: int) -> tuple[int, int]:
    sem = asyncio.Semaphore(k)
    limits = httpx.Limits(max_connections=k, max_keepalive_connections=k)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def one(body: dict) -> int:
            async with sem:
                r = await client.post(url + "/chat/completions", json=body)
            data = r.json()
            assert data["choices"][0]["message"]["content"] is not None
            return data["usage"]["completion_tokens"]

        tokens = await asyncio.gather(*(one(b) for b in bodies))
    return len(bodies), sum(tokens)


def run_plain(url: str, bodies: list[dict], k: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    _, tokens = asyncio.run(plain(url, bodies, k))
    return time.perf_counter() - t0, tokens


def run_saber(url: str, model: str, reqs: list[LLMRequest], k: int) -> tuple[float, int]:
    backend = OpenAIBackend(base_url=url, model=model, max_concurrency=k, server="llama.cpp")
    t0 = time.perf_counter()
    out = backend.generate(reqs)
    elapsed = time.perf_counter() - t0
    assert len(out) == len(reqs)
    return elapsed, backend.transport.completion_tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=48, help="requests per level")
    ap.add_argument("--levels", default="1,4,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--task", choices=["judge", "topics"], default="judge")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    reqs = requests_for(args.task, args.n)
    with LlamaServer(
        server_binary(), bundled_model(), parallel=max(levels), ctx=1024 * max(levels)
    ) as srv:
        body_of = OpenAIBackend(base_url=srv.url, model=srv.alias, server="llama.cpp")
        bodies = [body_of.body(r) for r in reqs]
        # warm the server (first requests load pages of the model)
        run_plain(srv.url, bodies[:4], 4)
        print(f"{args.n} {args.task} requests per level, llama-server with {max(levels)} slots, "
              f"2 threads; median of {args.repeats}")  # fmt: skip
        print(
            "| in flight | plain req/s | saber req/s | plain tok/s | saber tok/s | saber / plain |"
        )
        print("|---|---|---|---|---|---|")
        for k in levels:
            p_runs, s_runs = [], []
            for _ in range(args.repeats):
                p_runs.append(run_plain(srv.url, bodies, k))
                s_runs.append(run_saber(srv.url, srv.alias, reqs, k))
            p_s = statistics.median(t for t, _ in p_runs)
            s_s = statistics.median(t for t, _ in s_runs)
            p_tok = statistics.median(tok for _, tok in p_runs)
            s_tok = statistics.median(tok for _, tok in s_runs)
            print(
                f"| {k} | {args.n / p_s:.2f} | {args.n / s_s:.2f} | {p_tok / p_s:.1f} | "
                f"{s_tok / s_s:.1f} | {p_s / s_s:.3f} |"
            )


if __name__ == "__main__":
    main()
