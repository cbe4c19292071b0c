"""How stage assets are declared where several share a shape."""

from dagster import asset


def analysis(**extra):
    """The decorator of every analysis: group `analyses`, a Parquet output."""
    return asset(
        group_name="analyses", io_manager_key="parquet_io", kinds={"polars", "parquet"}, **extra
    )
