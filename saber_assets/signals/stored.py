"""Where the signal stage keeps its files, and the stored pairs as the later stages read them."""

import hashlib
import json
from pathlib import Path

import numpy as np

from saber_assets.outputs import write_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.signals.bounds import StorageFloors
from saber_assets.signals.compute import csr_take, memory_available
from saber_assets.signals.kernels import row_histograms
from saber_assets.signals.pairs import StoredPairs
from saber_assets.signals.prepare import SignalInputs
from saber_assets.signals.shards import read_header
from saber_assets.signals.summaries import row_group_counts
from saber_assets.signals.thresholds import Cut, ExactSignals
from saber_assets.versions import code_digest


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
    write_whole(d / "floors.json", json.dumps(floors.as_dict(), indent=1))


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
    write_whole(path, hist)
    for old in d.glob("row_hist-*.npy"):
        if old != path:
            old.unlink(missing_ok=True)
    return hist


# ------------------------------------------------------------------ viability summaries' files


def summary_path(d: Path, partition: str) -> Path:
    return d / f"{partition}.summary.npz"


def write_summaries(path: Path, summary: np.ndarray, header: dict) -> int:
    """One shard's rows' summaries and what they were computed for (rows, n, corpus version,
    k, floors), written whole; returns the bytes written."""
    write_whole(path, {"summary": summary, "header": np.array(json.dumps(header))})
    return path.stat().st_size


def read_summary_header(path: Path) -> dict:
    with np.load(path) as z:
        return json.loads(str(z["header"]))


def load_summaries(d: Path, inputs: SignalInputs, k: int, floors: tuple[int, int]) -> np.ndarray:
    """Every row's summary, from the shard files: each must be of this corpus (its n and
    version), this K and these floors, and together they must cover every row once."""
    out = np.empty((inputs.n, 255, 2), dtype=np.uint8)
    covered = np.zeros(inputs.n, dtype=np.int64)
    version = inputs.prefix_version(inputs.n)
    for path in sorted(d.glob("*.summary.npz")):
        with np.load(path) as z:
            h = json.loads(str(z["header"]))
            want = {"n": inputs.n, "corpus_version": version, "k": k, "floors": list(floors)}
            got = {key: h.get(key) for key in want}
            if got != want:
                raise ValueError(
                    f"{path.name}: summaries of {got}, not {want}: materialise pair_signal_shards"
                )
            out[h["row_start"] : h["row_end"]] = z["summary"]
            covered[h["row_start"] : h["row_end"]] += 1
    if (covered != 1).any():
        missing = int((covered == 0).sum())
        raise ValueError(
            f"the summary files cover {inputs.n - missing:,} of {inputs.n:,} rows"
            + (" (some twice)" if (covered > 1).any() else "")
            + ": materialise every pair_signal_shards partition"
        )
    return out


def summary_digests(d: Path) -> list[str]:
    """Each summary file's name and content hash: what a selection from them read."""
    out = []
    for path in sorted(d.glob("*.summary.npz")):
        h = hashlib.blake2b(digest_size=12)
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        out.append(f"{path.name}:{h.hexdigest()}")
    return out


def cut_viable_rows(
    d: Path, inputs: SignalInputs, cuts: tuple[Cut, Cut], k: int, exact: ExactSignals, threads: int
) -> np.ndarray:
    """Which rows have >= ``k`` candidates in each group at thresholds given as numbers (or
    taken as percentiles), which the summaries cannot answer: counted over the triangle
    (``summaries.row_group_counts``) and kept under what they were counted from, so that the
    candidates read what the thresholds counted instead of a second kernel pass (and the code
    that counts them: a fixed kernel is not answered from a file its bug wrote)."""
    what = [inputs.prefix_version(inputs.n), [c.key() for c in cuts], k, code_digest([__name__])]
    key = hashlib.blake2b(json.dumps(what).encode(), digest_size=12).hexdigest()
    path = d / "viable" / f"{key}.npy"
    if path.exists():
        return np.load(path)
    viable = row_group_counts(inputs.arrays, *cuts, exact, threads).min(axis=1) >= k
    path.parent.mkdir(exist_ok=True)
    write_whole(path, viable)
    for old in path.parent.glob("*.npy"):
        if old != path:
            old.unlink(missing_ok=True)
    return viable
