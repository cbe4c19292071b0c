"""Partition sets shared by stages."""

import hashlib

from dagster import StaticPartitionsDefinition

from ..ontology.tree import DOMAINS

domain_partitions = StaticPartitionsDefinition(DOMAINS)


def chunk_keys(n: int) -> list[str]:
    return [f"chunk-{i:03d}" for i in range(n)]


def chunk_of(problem_id: str, n: int) -> str:
    """Stable bucket of a problem id: appending problems never moves an existing one."""
    h = int.from_bytes(hashlib.blake2b(problem_id.encode(), digest_size=8).digest(), "big")
    return f"chunk-{h % n:03d}"


def annotation_partitions(n: int) -> StaticPartitionsDefinition:
    return StaticPartitionsDefinition(chunk_keys(n))
