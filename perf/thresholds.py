"""Thresholds and candidate selection over stored pairs: all in memory vs a shard at a time.

uv run python perf/thresholds.py                        # N = 70,000 rows, 11% stored
uv run python perf/thresholds.py --rows 20000 --density 0.13 --budget-mib 256

Synthetic shard files of N rows (each later row pairs with a row with probability ``density``; topic quanta uniform above the floor or summary quanta gamma-distributed above
theirs, like the stored pairs of the scale rehearsal) are written once; then, each in a fresh
process so that peak RSS is its own, (a) the thresholds with every pair loaded and grouped in
memory — the implementation before this benchmark — and (b) the same thresholds gathered by row
groups within a budget (``StoredPairs.row_blocks``); then candidate selection with the pairs in
memory vs streamed shard by shard. Results must be equal; the table gives seconds, peak RSS and
their ratios (streamed / in memory), into perf/out/thresholds.md and .json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
OUT = REPO / "perf" / "out"

FLOOR_T, FLOOR_S = 128, 51  # quantize(0.5), quantize(0.2): the default storage floors
DOMAINS = ["Algebra", "Geometry", "Number Theory", "Combinatorics", "Calculus and Analysis"]


def write_shards(d: Path, n: int, density: float, shards: int, seed: int) -> int:
    from saber_assets.signals.shards import UPPER, Shard, write_shard

    rng = np.random.default_rng(seed)
    bounds = np.linspace(0, n, shards + 1).astype(int)
    total = 0
    for k in range(shards):
        r0, r1 = int(bounds[k]), int(bounds[k + 1])
        rows = np.arange(r0, r1)
        # each later row joins independently with probability `density`: gaps are geometric
        parts = []
        for r in rows:
            gaps = rng.geometric(density, int(density * (n - r) * 1.3) + 16)
            cols_r = r + np.cumsum(gaps)
            assert cols_r[-1] >= n, "too few gaps drawn"
            parts.append(cols_r[cols_r < n])
        indptr = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([len(x) for x in parts], out=indptr[1:])
        cols = np.concatenate(parts).astype(np.int32)
        m = int(indptr[-1])
        tq = rng.integers(0, 256, m).astype(np.uint8)
        sq = np.minimum(255, rng.gamma(2.0, 25.0, m)).astype(np.uint8)
        below = (tq < FLOOR_T) & (sq < FLOOR_S)  # stored pairs reach a floor in one signal
        tq[below] = rng.integers(FLOOR_T, 256, int(below.sum())).astype(np.uint8)
        shard = Shard(UPPER, n, r0, r1, FLOOR_T, FLOOR_S, 255, "bench", indptr, cols, tq, sq,
                      np.zeros((len(rows), 2, 2), np.uint32))  # fmt: skip
        write_shard(d / f"shard-{k:03d}.upper.sig", shard)
        total += m
    return total


def row_domains(n: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed + 1)
    first = rng.integers(0, len(DOMAINS), n)
    second = rng.integers(0, len(DOMAINS), n)
    return [sorted({DOMAINS[a], DOMAINS[b]}) for a, b in zip(first, second, strict=True)]


def load_all(pairs) -> tuple[np.ndarray, ...]:
    """Every stored pair in arrays sized from the headers, filled shard by shard: how the
    thresholds and candidates loaded them before (10 bytes a pair, no concatenation copy)."""
    total = pairs.total_pairs
    i, j = np.empty(total, np.int32), np.empty(total, np.int32)
    tq, sq = np.empty(total, np.uint8), np.empty(total, np.uint8)
    at = 0
    for a, b, t, s in pairs.chunks():
        end = at + len(a)
        i[at:end], j[at:end], tq[at:end], sq[at:end] = a, b, t, s
        at = end
    return i, j, tq, sq


def child(d: str, n: int, mode: str, budget: int, q: int, k: int, seed: int) -> None:
    """One measured step in this process: prints a JSON line."""
    from saber_assets.candidates.select import select_candidates
    from saber_assets.signals.pairs import StoredPairs
    from saber_assets.signals.thresholds import derive_thresholds, in_memory_blocks

    pairs = StoredPairs(sorted(Path(d).glob("*.sig")), n)
    doms = row_domains(n, seed)
    t0 = time.perf_counter()
    if mode == "thresholds_memory":
        arrays = load_all(pairs)
        choice = derive_thresholds(
            in_memory_blocks(n, arrays), doms, DOMAINS, q, k, FLOOR_T, FLOOR_S
        )
    elif mode == "thresholds_streamed":
        choice = derive_thresholds(pairs.row_blocks(budget), doms, DOMAINS, q, k, FLOOR_T, FLOOR_S)
    else:
        thr = json.loads(Path(d, "thresholds.json").read_text())
        if mode == "candidates_memory":
            arrays = load_all(pairs)
            source = lambda: [arrays]  # noqa: E731
        else:
            source = pairs.chunks
        sel = select_candidates([f"p{r}" for r in range(n)], doms, DOMAINS, source,
                                thr["t"], thr["s"], k, q, seed)  # fmt: skip
        choice = None
    seconds = time.perf_counter() - t0
    result = (
        {"t": choice.topic_q, "s": choice.summary_q, "viable": choice.viable_at_final}
        if choice is not None
        else {"rows": sel.height, "digest": int(sel.hash_rows().sum())}
    )
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
    status = Path("/proc/self/status").read_text().split("\n")
    peak = int(next(x for x in status if x.startswith("VmHWM:")).split()[1]) * 1024
    print(json.dumps({"mode": mode, "seconds": seconds, "peak_rss": peak, "result": result}))


def measure(d: Path, n: int, mode: str, budget: int, q: int, k: int, seed: int) -> dict:
    args = [sys.executable, __file__, "--child", str(d), "--rows", str(n), "--mode", mode]
    args += ["--budget-mib", str(budget / 2**20), "--q", str(q), "--k", str(k), "--seed", str(seed)]
    run = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=70_000)
    ap.add_argument("--density", type=float, default=0.11)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--budget-mib", type=float, default=512)
    ap.add_argument("--q", type=int, default=150, help="queries per domain (paper: 150)")
    ap.add_argument("--k", type=int, default=50, help="candidates per group (paper: 50)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child")
    ap.add_argument("--mode")
    a = ap.parse_args()
    budget = int(a.budget_mib * 2**20)
    if a.child:
        return child(a.child, a.rows, a.mode, budget, a.q, a.k, a.seed)
    with tempfile.TemporaryDirectory(prefix="saber-thr-") as d:
        t0 = time.perf_counter()
        total = write_shards(Path(d), a.rows, a.density, a.shards, a.seed)
        size = sum(p.stat().st_size for p in Path(d).glob("*.sig"))
        print(f"{a.rows:,} rows, {total:,} stored pairs, {size / 2**30:.2f} GiB of shards "
              f"written in {time.perf_counter() - t0:.0f} s")  # fmt: skip
        res = {m: measure(Path(d), a.rows, m, budget, a.q, a.k, a.seed)
               for m in ("thresholds_memory", "thresholds_streamed")}  # fmt: skip
        thr = res["thresholds_memory"]["result"]
        Path(d, "thresholds.json").write_text(json.dumps(thr))
        for m in ("candidates_memory", "candidates_streamed"):
            res[m] = measure(Path(d), a.rows, m, budget, a.q, a.k, a.seed)
    for step in ("thresholds", "candidates"):
        if res[f"{step}_memory"]["result"] != res[f"{step}_streamed"]["result"]:
            raise SystemExit(f"{step}: streamed result differs from the in-memory one: {res}")
    lines = [
        f"N = {a.rows:,} rows, {total:,} stored pairs ({size / 2**30:.2f} GiB of shards), "
        f"budget {a.budget_mib:g} MiB, Q = {a.q}, K = {a.k}; thresholds ({thr['t']}, {thr['s']}) quanta",
        "",
        "| step | in memory: s / peak GiB | streamed: s / peak GiB | time ratio | RSS ratio |",
        "|---|---|---|---|---|",
    ]
    for step in ("thresholds", "candidates"):
        mem, st = res[f"{step}_memory"], res[f"{step}_streamed"]
        lines.append(
            f"| {step} | {mem['seconds']:.1f} / {mem['peak_rss'] / 2**30:.2f} | "
            f"{st['seconds']:.1f} / {st['peak_rss'] / 2**30:.2f} | "
            f"{st['seconds'] / mem['seconds']:.2f} | {st['peak_rss'] / mem['peak_rss']:.2f} |"
        )
    text = "\n".join(lines)
    print(text)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "thresholds.md").write_text(text + "\n")
    (OUT / "thresholds.json").write_text(
        json.dumps({"args": vars(a), "pairs": total, "results": res}, indent=1)
    )


if __name__ == "__main__":
    main()
