"""The partition sets of the stages, by the name the stage table gives them (``Stage.partitioned_by``)."""

import hashlib
from collections.abc import Sequence

from dagster import (
    DynamicPartitionsDefinition,
    MultiPartitionsDefinition,
    PartitionsDefinition,
    StaticPartitionsDefinition,
)

from saber_assets.ontology.domains import domain_keys
from saber_assets.settings import PipelineConfig

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


def stage_partitions(cfg: PipelineConfig) -> dict[str, PartitionsDefinition]:
    """Each partitioning of the stage table, with the config's chunk, shard and domain counts."""
    by_domain = domain_partitions(list(domain_keys(cfg.ontology).values()))
    return {
        "annotation chunk": annotation_partitions(cfg.annotations.chunks),
        "signal shard": shard_partitions(cfg.signals.shards),
        "domain": by_domain,
        "retriever": retriever_partitions,
        "training corpus": training_partitions,
        "domain × retriever": MultiPartitionsDefinition(
            {"retriever": retriever_partitions, "domain": by_domain}
        ),
    }
