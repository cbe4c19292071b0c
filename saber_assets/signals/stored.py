"""Where the signal stage keeps its files, and the stored pairs as the later stages read them."""

import json
from pathlib import Path

import numpy as np

from saber_assets.resources import SaberSettings
from saber_assets.signals.bounds import StorageFloors
from saber_assets.signals.compute import memory_available
from saber_assets.signals.kernels import row_histograms
from saber_assets.signals.pairs import StoredPairs
from saber_assets.signals.prepare import SignalInputs
from saber_assets.signals.shards import read_header


def signals_dir(settings: SaberSettings) -> Path:
    return settings.output_dir() / "signals"


def segment_versions(inputs: SignalInputs, paths: list[Path]) -> dict[int, str]:
    return {n: inputs.prefix_version(n) for n in {read_header(p)["n"] for p in paths}}


def stored_pairs(settings: SaberSettings, ids: list[str]) -> tuple[SignalInputs, StoredPairs]:
    """The kernel inputs and the stored pairs (read shard by shard), each shard checked against
    the corpus prefix it was computed for."""
    d = signals_dir(settings)
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


def cached_row_histograms(inputs: SignalInputs, d: Path, bins: int, threads: int) -> np.ndarray:
    """``kernels.row_histograms`` of the corpus, kept beside the shards under the content they
    were counted from: a change to the candidates section re-bounds without the kernel pass."""
    key = f"{inputs.prefix_version(inputs.n)}-{bins}"
    path = d / f"row_hist-{key}.npy"
    if path.exists():
        return np.load(path)
    hist = row_histograms(
        inputs.t_ptr, inputs.t_idx, inputs.lin, inputs.s_ptr, inputs.s_idx, bins, threads
    )
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, hist)
    tmp.replace(path)
    for old in d.glob("row_hist-*.npy"):
        if old != path:
            old.unlink(missing_ok=True)
    return hist
