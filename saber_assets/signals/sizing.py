"""How much memory one signal-shard run needs: the sizing of its pod on a cluster.

One shard holds the Lin table of the topics in use (float32, squared), the gathered topic
vectors, per-row buffers and histograms, the stored pairs of its rows (``stored_fraction`` of
``rows × n`` at ``BYTES_PER_PAIR``, bytes) and the annotation inputs of every problem. The
measurement (`perf/signals.py`) prints it next to the peak RSS it measures.

Under ``signals.layout: summaries`` a shard run holds no stored pairs of its own: each thread
holds one block of full rows' pairs at the floors (``summaries.BLOCK_ROWS`` rows × n ×
``stored_fraction``) while it sums them up, and the shard's summaries (two bytes per row and
topic threshold, twice while it grows).
"""

from __future__ import annotations

import math

from saber_assets.config import DEFAULT_STORED_FRACTION, PipelineConfig, PodSize
from saber_assets.signals.shards import BYTES_PER_PAIR
from saber_assets.signals.summaries import BLOCK_ROWS

# a held pair of a block: row (8), other row (4) and both bytes, with half again of room
# (``summaries_of_rows`` guesses from the last block), then sorted: its order and the copies
BLOCK_BYTES_PER_PAIR = 14 * 1.5 + 8 + 14


def shard_memory_bytes(
    n_problems: int,
    rows_per_shard: int,
    used_topics: int = 17_000,
    stored_fraction: float = DEFAULT_STORED_FRACTION,
) -> float:
    return (
        used_topics**2 * 4  # Lin table, float32
        + used_topics * 384 * 4  # gathered topic rows
        + rows_per_shard * 16 * 16 * 4  # per-row histograms and buffers
        + stored_fraction * rows_per_shard * n_problems * (BYTES_PER_PAIR + 8)  # pairs + ids
        + n_problems * 30 * 8  # every problem's topic and summary-token ids
    )


def summary_shard_memory_bytes(
    n_problems: int,
    rows_per_shard: int,
    threads: int,
    used_topics: int = 17_000,
    stored_fraction: float = DEFAULT_STORED_FRACTION,
) -> float:
    return (
        used_topics**2 * 4  # Lin table, float32
        + threads * used_topics * 384 * 4  # each thread's gathered topic rows
        + threads * stored_fraction * BLOCK_ROWS * n_problems * BLOCK_BYTES_PER_PAIR
        + 2 * rows_per_shard * 255 * 2  # the shard's summaries, old and new
        + n_problems * (30 * 8 + 8)  # every problem's ids; the rows' positions
    )


def shard_pod_memory_gib(
    n_problems: int,
    rows_per_shard: int,
    headroom: float = 1.5,
    stored_fraction: float = DEFAULT_STORED_FRACTION,
    summaries_threads: int | None = None,
) -> int:
    """Whole GiB for the pod's request: the estimate × headroom, plus 1 GiB for Python and
    Dagster; ``summaries_threads``: a shard of the summaries layout with that many threads."""
    if summaries_threads is None:
        need = shard_memory_bytes(n_problems, rows_per_shard, stored_fraction=stored_fraction)
    else:
        need = summary_shard_memory_bytes(
            n_problems, rows_per_shard, summaries_threads, stored_fraction=stored_fraction
        )
    return math.ceil(need * headroom / 2**30) + 1


def bounds_memory_bytes(n_problems: int, bins: int, threads: int) -> float:
    """The first pass (``pair_signal_bounds``): every thread's per-row histograms (uint32), their
    sum, the Lin table and every problem's annotation ids."""
    return (threads + 1) * n_problems * bins * bins * 4 + 17_000**2 * 4 + n_problems * 30 * 8


def bounds_pod_memory_gib(n_problems: int, bins: int, threads: int, headroom: float = 1.5) -> int:
    return math.ceil(bounds_memory_bytes(n_problems, bins, threads) * headroom / 2**30) + 1


def largest_shard_rows(cfg: PipelineConfig) -> int:
    """The last shard also takes every row past shards × rows_per_shard: size for it."""
    sig = cfg.signals
    return max(
        sig.rows_per_shard, cfg.pods.expected_problems - (sig.shards - 1) * sig.rows_per_shard
    )


def shard_pod(cfg: PipelineConfig) -> PodSize:
    """One row-block shard of pairs: its estimate at the corpus the pods expect."""
    sig = cfg.signals
    gib = shard_pod_memory_gib(
        cfg.pods.expected_problems,
        largest_shard_rows(cfg),
        stored_fraction=cfg.pods.stored_fraction,
        summaries_threads=sig.threads if sig.layout == "summaries" else None,
    )
    return PodSize(cpu=str(sig.threads), memory=f"{gib}Gi")


def signal_pass_pod(cfg: PipelineConfig) -> PodSize:
    """The first, storage-free pass over every pair."""
    sig = cfg.signals
    gib = bounds_pod_memory_gib(cfg.pods.expected_problems, sig.bound_bins, sig.threads)
    return PodSize(cpu=str(sig.threads), memory=f"{max(gib, 4)}Gi")
