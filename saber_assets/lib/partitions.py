"""The partition sets of the stages, by the name the stage table gives them (``Stage.partitioned_by``)."""

import hashlib
from collections.abc import Sequence

from dagster import (
    DynamicPartitionsDefinition,
    StaticPartitionsDefinition,
)

# one partition per registry entry (added by the build and the registry sensor, never removed)
retriever_partitions = DynamicPartitionsDefinition(name="retriever")
# one partition per training corpus with text that the registry declares (same lifecycle)
training_partitions = DynamicPartitionsDefinition(name="training_corpus")


def domain_partitions(domains: Sequence[str]) -> StaticPartitionsDefinition:
    """One partition per configured domain (``ontology.domains``), built when definitions load."""
    return StaticPartitionsDefinition(list(domains))


def chunk_keys(n: int) -> list[str]:
    return [f"chunk-{i:03d}" for i in range(n)]


def chunk_of(problem_id: str, n: int) -> str:
    """Stable bucket of a problem id: appending problems never moves an existing one."""
    h = int.from_bytes(hashlib.blake2b(problem_id.encode(), digest_size=8).digest(), "big")
    return f"chunk-{h % n:03d}"


def annotation_partitions(n: int) -> StaticPartitionsDefinition:
    return StaticPartitionsDefinition(chunk_keys(n))


def shard_keys(n: int) -> list[str]:
    return [f"shard-{k:03d}" for k in range(n)]


def shard_partitions(n: int) -> StaticPartitionsDefinition:
    return StaticPartitionsDefinition(shard_keys(n))
