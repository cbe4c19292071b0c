"""Where the leaderboard stage keeps its files: run files and indexes per retriever."""

from pathlib import Path

from saber_assets.resources import SaberSettings


def runs_dir(settings: SaberSettings) -> Path:
    return settings.output_dir() / "runs"


def index_root(settings: SaberSettings, name: str) -> Path:
    return settings.output_dir() / "indexes" / name


def contamination_dir(settings: SaberSettings) -> Path:
    """The contamination audit's files: one folder per training corpus, and the benchmark's
    own-candidate matches."""
    return settings.output_dir() / "contamination"
