"""The first pass's trade: kernel time ×2 against the pairs stored (and written, and read).

    uv run python perf/bounds.py [--n 12000] [--threads 1]

On a synthetic corpus (Zipf-skewed topics over a random Lin table, random token sets), in one
run: the storage-free first pass (``kernels.row_histograms``), the shard kernel storing from the
configured floors (0.5 / 0.2: the baseline, what the shards stored before), and storing from
higher floors like those the bounds give; printed with pairs/s, stored share and the ratio of
(first pass + bounded store) to the baseline. Disk comes on top: 6 bytes a stored pair.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from saber_assets.signals.kernels import row_histograms, signal_block, to_csr


def corpus(n: int, topics: int = 400, seed: int = 0):
    rng = np.random.default_rng(seed)
    lin = rng.random((topics, topics)).astype(np.float32) ** 3
    lin = (lin + lin.T) / 2
    np.fill_diagonal(lin, 1)
    p = 1 / np.arange(1, topics + 1)
    p /= p.sum()
    t_sets = [rng.choice(topics, rng.integers(1, 5), replace=False, p=p).tolist() for _ in range(n)]
    s_sets = [rng.choice(300, rng.integers(4, 20), replace=False).tolist() for _ in range(n)]
    tp, ti = to_csr(t_sets)
    sp, si = to_csr(s_sets)
    return tp, ti, lin, sp, si


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=12_000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    tp, ti, lin, sp, si = arrays = corpus(args.n)
    n, th = args.n, args.threads
    small = (tp[:101], ti[: tp[100]], lin, sp[:101], si[: sp[100]])
    row_histograms(*small, 16)  # compile outside the timings
    signal_block(*small, 0, 100, 127, 51)
    pairs = n * (n - 1) / 2
    runs = {
        "first pass (count only)": lambda: row_histograms(*arrays, 16, threads=th),
        "store from 0.5 / 0.2 (baseline)": lambda: signal_block(*arrays, 0, n, 127, 51, threads=th),
        "store from 0.8 / 0.3": lambda: signal_block(*arrays, 0, n, 204, 77, threads=th),
    }
    took = {}
    for name, run in runs.items():
        t0 = time.perf_counter()
        out = run()
        took[name] = dt = time.perf_counter() - t0
        stored = out[1].size if isinstance(out, tuple) else 0
        print(
            f"{name:34s} {dt:7.2f} s {pairs / dt / 1e6:7.1f} M pairs/s "
            f"stored {stored:>12,} ({stored / pairs:.2%}, {6 * stored / 2**20:,.0f} MiB)"
        )
    names = list(runs)
    ratio = (took[names[0]] + took[names[2]]) / took[names[1]]
    print(f"first pass + bounded store / baseline store: {ratio:.2f}")


if __name__ == "__main__":
    main()
