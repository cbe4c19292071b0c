"""The pipeline resource (which config the assets read, where their outputs and stores live), shared
by the stages; the swappable resources live in ``saber_resources``."""

from pathlib import Path

from dagster import ConfigurableResource, EnvVar
from pydantic import PrivateAttr

from saber_assets.config import (
    DEFAULT_CONFIG,
    PipelineConfig,
    data_home,
    load_config,
)
from saber_assets.outputs import Outputs
from saber_resources.stores import StoreDB, StoresResource


class PipelineResource(ConfigurableResource):
    """Which pipeline config file the assets read (``configs/sample.yaml`` by default)."""

    config_file: str = str(DEFAULT_CONFIG)
    home: str = ""  # the outputs' root; empty: $SABER_HOME or .saber/
    # the config as this resource first read it: one run reads one config, and reading and
    # validating the file again was 3.2 s of a 70K rehearsal's 25 s of runs (18 reads a domain)
    _loaded: PipelineConfig | None = PrivateAttr(default=None)

    def load(self) -> PipelineConfig:
        if self._loaded is None:
            self._loaded = load_config(self.config_file)
        return self._loaded

    def home_dir(self) -> Path:
        return Path(self.home) if self.home else data_home()

    def output_dir(self) -> Path:
        """Where this config's outputs live: <home> / <config name>."""
        return self.home_dir() / self.load().name

    def outputs(self) -> Outputs:
        """The folders in it that stages and commands share (``saber_assets/outputs.py``)."""
        return Outputs(self.output_dir())

    def registry_path(self) -> Path:
        """The retriever registry file (``retrievers.registry``, relative to the repository)."""
        return self.load().retrievers.registry_path()


def stores_resource(cfg: PipelineConfig, home: Path) -> StoresResource:
    """The config's stores: DuckDB under the outputs, or PostgreSQL with the DSN from the
    environment variable the config names (an ``EnvVar``: never logged)."""
    if cfg.stores.kind == "postgres":
        return StoresResource(kind="postgres", dsn=EnvVar(cfg.stores.dsn_env))
    return StoresResource(
        kind="duckdb",
        path=str(Outputs.of(cfg, home).stores),
        legacy_path=str(Outputs.of(cfg, home).warehouse),
    )


def open_stores(cfg: PipelineConfig, home: Path | None = None) -> StoreDB:
    """The config's stores outside a Dagster run (the command line): the resource with its
    environment variables resolved, as Dagster resolves them for a run."""
    resource = stores_resource(cfg, home or data_home())
    return resource.process_config_and_initialize().db()
