"""MinHash near-duplicate clustering with datatrove, keeping the highest-priority source's row.

datatrove computes signatures, LSH buckets and the union-find clusters; we read its cluster ids
back and choose the keeper ourselves, because datatrove keeps an arbitrary cluster root while the
corpus must keep the row of the highest-priority source (ties: earlier-declared source, then
earlier line).
"""

from __future__ import annotations

import re
import struct
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from datatrove.data import Document
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupSignature,
)
from datatrove.utils.text import TextNormConfig
from datatrove.utils.word_tokenizers import WordTokenizer
from loguru import logger

# datatrove logs every stage's stats at INFO: the asset reports what matters itself.
logger.disable("datatrove")

# LaTeX commands stay whole (\frac, \sqrt), numbers and words are tokens, any other symbol is one.
_TOKEN = re.compile(r"\\[A-Za-z]+|[A-Za-z]+|\d+|[^\sA-Za-z\d]")


class LatexWordTokenizer(WordTokenizer):
    """Word tokenizer for math text: datatrove's default (spaCy/NLTK) drops the LaTeX structure."""

    def __init__(self) -> None:
        super().__init__("latex")

    def word_tokenize(self, text: str) -> list[str]:
        return _TOKEN.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"[^.!?]+[.!?]?", text)]


@dataclass(frozen=True)
class DedupItem:
    id: str
    text: str
    priority: int
    order: int  # declaration order of the source, then line: lower is preferred on ties


@dataclass(frozen=True)
class DuplicateLink:
    removed_id: str
    kept_id: str
    cluster: int


def minhash_config(
    n_grams: int, num_buckets: int, hashes_per_bucket: int, seed: int
) -> MinhashConfig:
    # Numbers and symbols carry the meaning of a math problem: do not fold them away.
    norm = TextNormConfig(norm_numbers=False, remove_punctuation=False)
    return MinhashConfig(
        n_grams=n_grams,
        num_buckets=num_buckets,
        hashes_per_bucket=hashes_per_bucket,
        seed=seed,
        norm_config=norm,
    )


def find_duplicates(
    items: Sequence[DedupItem], config: MinhashConfig, workdir: Path | None = None
) -> list[DuplicateLink]:
    """Cluster near-duplicates; return one link per removed item to the item its cluster keeps."""
    if len(items) < 2:
        return []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        docs = [Document(text=it.text, id=str(i)) for i, it in enumerate(items)]
        stages = [
            [
                docs,
                MinhashDedupSignature(
                    output_folder=str(tmp / "sigs"), config=config, language=LatexWordTokenizer()
                ),
            ],
            [
                MinhashDedupBuckets(
                    input_folder=str(tmp / "sigs"),
                    output_folder=str(tmp / "buckets"),
                    config=config,
                )
            ],
            [
                MinhashDedupCluster(
                    input_folder=str(tmp / "buckets"),
                    output_folder=str(tmp / "clusters"),
                    config=config,
                    save_cluster_id=True,
                )
            ],
        ]
        for i, pipeline in enumerate(stages):
            tasks = config.num_buckets if i == 1 else 1
            LocalPipelineExecutor(
                pipeline=pipeline,
                tasks=tasks,
                workers=1,
                logging_dir=str(tmp / f"logs{i}"),
                skip_completed=False,
            ).run()
        cluster_file = tmp / "clusters" / "000000.clusters"
        if not cluster_file.exists():
            return []
        raw = cluster_file.read_bytes()
    members: dict[int, list[int]] = {}
    for doc_idx, cluster in struct.iter_unpack("<II", raw):
        members.setdefault(cluster, []).append(doc_idx)
    links: list[DuplicateLink] = []
    for cluster, idxs in sorted(members.items()):
        keeper = min(idxs, key=lambda i: (-items[i].priority, items[i].order))
        for i in sorted(idxs):
            if i != keeper:
                links.append(DuplicateLink(items[i].id, items[keeper].id, cluster))
    return links
