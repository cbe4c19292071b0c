"""How stage assets are declared where several share a shape."""

from dagster import DataVersion, asset, observable_source_asset

from saber_assets.resources import SaberSettings
from saber_assets.versions import input_versions


def analysis(**extra):
    """The decorator of every analysis: group `analyses`, a Parquet output."""
    return asset(
        group_name="analyses", io_manager_key="parquet_io", kinds={"polars", "parquet"}, **extra
    )


def input_files_asset(name: str, group: str, description: str):
    """An observable source asset for input files (``versions.input_versions``): their content
    hash is the data version, so a changed file marks what reads it unsynced (observed by each
    build and by the input files sensor)."""

    @observable_source_asset(name=name, group_name=group, description=description)
    def observe(settings: SaberSettings) -> DataVersion:
        return DataVersion(input_versions(settings.load())[name])

    return observe
