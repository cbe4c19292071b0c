"""Where the signal stage keeps its files, and the stored pairs as the later stages read them."""

import json
from pathlib import Path

import numpy as np

from saber_assets.outputs import written_whole
from saber_assets.resources import PipelineResource
from saber_assets.signals.bounds import StorageFloors
from saber_assets.signals.compute import csr_take, memory_available
from saber_assets.signals.kernels import row_histograms
from saber_assets.signals.pairs import StoredPairs
from saber_assets.signals.prepare import SignalInputs
from saber_assets.signals.shards import read_header


def signals_dir(pipeline: PipelineResource) -> Path:
    return pipeline.outputs().signals


def segment_versions(inputs: SignalInputs, paths: list[Path]) -> dict[int, str]:
    return {n: inputs.prefix_version(n) for n in {read_header(p)["n"] for p in paths}}


def stored_pairs(pipeline: PipelineResource, ids: list[str]) -> tuple[SignalInputs, StoredPairs]:
    """The kernel inputs and the stored pairs (read shard by shard), each shard checked against
    the corpus prefix it was computed for."""
    d = signals_dir(pipeline)
    inputs = SignalInputs.load(d / "inputs.npz")
    if inputs.ids != ids:
        raise ValueError(
            "signal shards were computed for another corpus: rematerialise pair_signal_inputs and the shards"
        )
    paths = sorted(d.glob("*.sig"))
    return inputs, StoredPairs(paths, inputs.n, segment_versions(inputs, paths))


def gather_budget(gib: float | None) -> int:
    """Bytes the threshold sweep may gather (or the stored pairs be held) at once: the
    configured GiB, or a quarter of what this process may use, at most 4 GiB."""
    return int(gib * 2**30) if gib else min(memory_available() // 4, 4 * 2**30)


def write_floors(d: Path, floors: StorageFloors) -> None:
    (d / "floors.json").write_text(json.dumps(floors.as_dict(), indent=1))


def read_floors(d: Path) -> tuple[int, int]:
    """The storage floors ``pair_signal_bounds`` chose (bytes: topic, summary)."""
    path = d / "floors.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no storage floors: materialise pair_signal_bounds first")
    data = json.loads(path.read_text())
    return int(data["topic"]), int(data["summary"])


def _hist_path(d: Path, inputs: SignalInputs, n: int, bins: int) -> Path:
    return d / f"row_hist-{n:09d}-{inputs.prefix_version(n)}-{bins}.npy"


def appended_histograms(inputs: SignalInputs, n0: int, bins: int, threads: int) -> np.ndarray:
    """The rows' histograms of only the pairs with a row at or past ``n0`` (appended rows with
    every earlier row and with each other): the prefix reversed, as a lower shard segment is."""
    rev = np.arange(inputs.n - 1, -1, -1)
    t_ptr, t_idx = csr_take(inputs.t_ptr, inputs.t_idx, rev)
    s_ptr, s_idx = csr_take(inputs.s_ptr, inputs.s_idx, rev)
    hist = row_histograms(
        t_ptr, t_idx, inputs.lin, s_ptr, s_idx, bins, threads, rows=(0, inputs.n - n0)
    )
    return hist[::-1]


def cached_row_histograms(inputs: SignalInputs, d: Path, bins: int, threads: int) -> np.ndarray:
    """``kernels.row_histograms`` of the corpus, kept beside the shards under the content they
    were counted from: a change to the candidates section re-bounds without the kernel pass,
    and appended problems count only their own pairs onto the corpus prefix's histograms."""
    path = _hist_path(d, inputs, inputs.n, bins)
    if path.exists():
        return np.load(path)
    prefix = None
    for old in sorted(d.glob("row_hist-*.npy")):
        field = old.name.split("-")[1]
        n0 = int(field) if field.isdigit() else inputs.n  # another layout: not a prefix
        if n0 < inputs.n and old == _hist_path(d, inputs, n0, bins):
            prefix = (n0, old)
    if prefix is not None:
        hist = appended_histograms(inputs, prefix[0], bins, threads)
        hist[: prefix[0]] += np.load(prefix[1])
    else:
        hist = row_histograms(
            inputs.t_ptr, inputs.t_idx, inputs.lin, inputs.s_ptr, inputs.s_idx, bins, threads
        )
    with written_whole(path) as tmp, open(tmp, "wb") as f:  # a file: np.save adds no suffix
        np.save(f, hist)
    for old in d.glob("row_hist-*.npy"):
        if old != path:
            old.unlink(missing_ok=True)
    return hist
