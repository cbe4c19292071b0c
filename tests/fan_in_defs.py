"""A 100-partition fan-in (the edge Dagster's stale status skips), for tests/test_remote.py."""

from dagster import Definitions, StaticPartitionsDefinition, asset

SHARDS = StaticPartitionsDefinition([f"s{i:03d}" for i in range(100)])


@asset(partitions_def=SHARDS)
def shards() -> None: ...


@asset(deps=[shards])
def index() -> None: ...


defs = Definitions(assets=[shards, index])
