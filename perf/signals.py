"""Pair-signal kernel benchmark on synthetic data with realistic shapes.

    uv run python perf/signals.py [--n 60000] [--rows 512]

Topic sets of 1-6 nodes of the real MathWorld tree (17,022 nodes) drawn Zipf-like, IC from those
draws, Lin among the used topics; summaries of 10-20 tokens over a 20K vocabulary (Zipf). Prints
unordered pairs/s/core of the block kernel (both signals, and each alone), the ratio against the
straightforward Numba pairwise loop measured in the same run, bytes stored per corpus pair at the
given floors, and the extrapolation to N = 283,000.
"""

from __future__ import annotations

import argparse
import resource
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from saber_assets.config import OntologyConfig
from saber_assets.ontology.assets import load_dag
from saber_assets.ontology.similarity import LCAIndex, information_content, lin_table
from saber_assets.ontology.tree import expand_to_tree
from saber_assets.signals.kernels import KernelArrays, pairwise_block_naive, signal_block, to_csr
from saber_assets.signals.shards import BYTES_PER_PAIR
from saber_assets.signals.sizing import shard_memory_bytes
from saber_assets.signals.summaries import viability_summaries

PAPER_ORDERED_PAIRS_PER_S = 0.87e6


def synthetic(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    tree = expand_to_tree(load_dag(OntologyConfig()))
    leaves_first = np.argsort(-tree.depth, kind="stable")  # specific topics are the common ones
    zipf_t = 1.0 / np.arange(1, tree.n_nodes + 1) ** 1.1
    zipf_t /= zipf_t.sum()
    sizes = rng.integers(1, 7, n)
    topic_sets = [leaves_first[rng.choice(tree.n_nodes, k, p=zipf_t)] for k in sizes]
    counts = np.bincount(np.concatenate(topic_sets), minlength=tree.n_nodes)
    ic = information_content(tree.parent, counts)
    used = np.unique(np.concatenate(topic_sets))
    # frequent topics first: their rows of Lin / best_row stay in cache (as prepare_inputs does)
    used = used[np.argsort(-counts[used], kind="stable")]
    local = {int(t): i for i, t in enumerate(used)}
    lin = lin_table(ic, LCAIndex(tree.parent, tree.depth), used)
    t_ptr, t_idx = to_csr([[local[int(t)] for t in s] for s in topic_sets])
    vocab = 20_000
    zipf_v = 1.0 / np.arange(1, vocab + 1) ** 1.0
    zipf_v /= zipf_v.sum()
    s_ptr, s_idx = to_csr([rng.choice(vocab, rng.integers(10, 21), p=zipf_v) for _ in range(n)])
    return t_ptr, t_idx, lin, s_ptr, s_idx


def rate(fn, pairs: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    return pairs / dt, dt, out


_DATA = None


def _worker_block(args):
    r0, r1, ft, fs = args
    t_ptr, t_idx, lin, s_ptr, s_idx = _DATA
    t0 = time.perf_counter()
    signal_block(t_ptr, t_idx, lin, s_ptr, s_idx, r0, r1, ft, fs)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=60_000)
    ap.add_argument("--rows", type=int, default=512, help="rows per measured block")
    ap.add_argument("--floor-topic", type=float, default=0.80)
    ap.add_argument("--floor-summary", type=float, default=0.30)
    ap.add_argument("--k", type=int, default=50, help="candidates per group, for the summaries")
    args = ap.parse_args()
    t0 = time.perf_counter()
    global _DATA
    t_ptr, t_idx, lin, s_ptr, s_idx = _DATA = synthetic(args.n)
    print(
        f"synthetic corpus: N={args.n:,}, used topics={lin.shape[0]:,}, built in {time.perf_counter() - t0:.1f}s"
    )
    ft, fs = int(round(args.floor_topic * 255)), int(round(args.floor_summary * 255))
    empty_ptr = np.zeros_like(t_ptr)
    empty_idx = np.zeros(0, dtype=np.int32)
    # warm up (compile) on a tiny block
    signal_block(t_ptr, t_idx, lin, s_ptr, s_idx, 0, 64, ft, fs)
    pairwise_block_naive(t_ptr, t_idx, lin, s_ptr, s_idx, 0, 1)
    r0, r1 = 0, args.rows
    pairs = sum(args.n - 1 - i for i in range(r0, r1))
    both, dt_both, out = rate(
        lambda: signal_block(t_ptr, t_idx, lin, s_ptr, s_idx, r0, r1, ft, fs), pairs
    )
    topic_only, _, _ = rate(
        lambda: signal_block(t_ptr, t_idx, lin, empty_ptr, empty_idx, r0, r1, ft, 255), pairs
    )
    summ_only, _, _ = rate(
        lambda: signal_block(empty_ptr, empty_idx, lin, s_ptr, s_idx, r0, r1, 255, fs), pairs
    )
    naive_rows = max(4, args.rows // 32)
    naive_pairs = sum(args.n - 1 - i for i in range(naive_rows))
    naive, _, _ = rate(
        lambda: pairwise_block_naive(t_ptr, t_idx, lin, s_ptr, s_idx, 0, naive_rows), naive_pairs
    )
    kept = len(out[1])
    # both cores: two shards (row blocks of equal pair counts) in two processes at once
    half = args.rows // 2
    blocks = [(r1 + k * half, r1 + (k + 1) * half, ft, fs) for k in range(2)]
    par_pairs = sum(args.n - 1 - i for b in blocks for i in range(b[0], b[1]))
    with ProcessPoolExecutor(2) as pool:  # fork: children share the inputs
        list(pool.map(_worker_block, [(0, 64, ft, fs)] * 2))  # warm (cached compile)
        t0 = time.perf_counter()
        list(pool.map(_worker_block, blocks))
        par = par_pairs / (time.perf_counter() - t0)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    threaded, _, _ = rate(
        lambda: signal_block(t_ptr, t_idx, lin, s_ptr, s_idx, r0, r1, ft, fs, threads=2), pairs
    )
    # the viability summaries' pass: full rows (every pair seen from both of its rows), nothing
    # stored but two bytes per row and topic threshold
    arrays = KernelArrays(t_ptr, t_idx, lin, s_ptr, s_idx)
    viability_summaries(arrays, 0, 64, args.k, (ft, fs))  # warm (compile)
    s_rows = min(args.rows, args.n)
    t0 = time.perf_counter()
    summary = viability_summaries(arrays, 0, s_rows, args.k, (ft, fs))
    summary_rows_s = s_rows / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    viability_summaries(arrays, 0, s_rows, args.k, (ft, fs), threads=2)
    summary_rows_s2 = s_rows / (time.perf_counter() - t0)
    frac = kept / pairs
    bytes_per_corpus_pair = frac * BYTES_PER_PAIR
    n_big = 283_000
    big_pairs = n_big * (n_big - 1) / 2
    t_big, shard_rows = 17_000, 10_000
    est = shard_memory_bytes(n_big, shard_rows, t_big, frac)
    paper = PAPER_ORDERED_PAIRS_PER_S / 2
    lines = [
        f"block of {args.rows} rows x {args.n:,} columns = {pairs:,} unordered pairs, one core",
        f"  combined BMA+Jaccard : {both / 1e6:8.1f} M pairs/s  ({dt_both:.2f}s)",
        f"  topic (BMA) alone    : {topic_only / 1e6:8.1f} M pairs/s",
        f"  summary (Jaccard)    : {summ_only / 1e6:8.1f} M pairs/s",
        f"  naive pairwise loop  : {naive / 1e6:8.1f} M pairs/s  -> block kernel is {both / naive:.1f}x faster",
        f"  two shards, 2 cores  : {par / 1e6:8.1f} M pairs/s aggregate ({par / both:.2f}x one core)",
        f"  one shard, 2 threads : {threaded / 1e6:8.1f} M pairs/s ({threaded / both:.2f}x one core; signals.threads)",
        f"  vs the paper's ~{paper / 1e6:.3f} M unordered pairs/s/core ({PAPER_ORDERED_PAIRS_PER_S / 1e6:.2f} M ordered): {both / paper:.0f}x",
        f"stored at floors topic>={args.floor_topic} or summary>={args.floor_summary}: {frac:.4%} of pairs"
        f" -> {bytes_per_corpus_pair:.4f} bytes per corpus pair = {bytes_per_corpus_pair / 4:.3%} of the 4-byte layout",
        f"extrapolated N={n_big:,} ({big_pairs:.2e} pairs): {big_pairs / both / 60:.1f} min on 1 core,"
        f" {big_pairs / max(par, threaded) / 60:.1f} min on 2 cores; {big_pairs * bytes_per_corpus_pair / 1e9:.2f} GB stored",
        f"peak RSS here: {peak_mb:,.0f} MB; a {shard_rows:,}-row shard at N={n_big:,} needs about {est / 1e9:.2f} GB"
        f" (Lin table of {t_big:,} topics, gathered columns, buffers, histograms, inputs)",
        f"  (Lin table of {lin.shape[0]:,} used topics here: {lin.nbytes / 1e6:.0f} MB)",
        f"viability summaries (k={args.k}), full rows of {args.n:,} columns: {summary_rows_s:,.0f} rows/s"
        f" on one core ({summary_rows_s * (args.n - 1) / 1e6:.1f} M row-pairs/s), {summary_rows_s2:,.0f}"
        f" rows/s with 2 threads; {summary.nbytes / s_rows:.0f} bytes per row",
        f"  extrapolated N={n_big:,}: the summary pass {n_big / (summary_rows_s2 * args.n / n_big) / 60:.1f} min"
        f" on 2 cores (rows cost in proportion to N), {n_big * summary.nbytes / s_rows / 1e6:.0f} MB of summaries",
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
