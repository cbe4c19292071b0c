"""Dagster resources shared by the stages (the swappable ones live in ``saber_resources``)."""

from pathlib import Path

from dagster import ConfigurableResource

from saber_assets.settings import (
    DEFAULT_CONFIG,
    PipelineConfig,
    data_home,
    load_config,
)


class SaberSettings(ConfigurableResource):
    """Which pipeline config file the assets read (``configs/sample.yaml`` by default)."""

    config_file: str = str(DEFAULT_CONFIG)
    home: str = ""  # the outputs' root; empty: $SABER_HOME or .saber/

    def load(self) -> PipelineConfig:
        return load_config(self.config_file)

    def output_dir(self) -> Path:
        """Where this config's outputs live: <home> / <config name>."""
        return (Path(self.home) if self.home else data_home()) / self.load().name

    def registry_path(self) -> Path:
        """The retriever registry file (``leaderboard.registry``, relative to the repository)."""
        return self.load().leaderboard.registry_path()
