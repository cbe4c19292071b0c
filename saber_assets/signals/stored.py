"""Where the signal stage keeps its files, and the stored pairs as the later stages read them."""

from pathlib import Path

from saber_assets.resources import SaberSettings
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
