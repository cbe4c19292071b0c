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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from loguru import logger

if TYPE_CHECKING:
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.word_tokenizers import WordTokenizer

# datatrove is imported where the clusters are computed, not with this module: its executor and
# readers pull huggingface_hub's client and fsspec, 0.3 s of the 2.9 s of CPU in which every
# process loads the definitions (each Dagster run worker, the UI's code server, every `saber` command),
# and only the corpus and contamination steps cluster anything.

# datatrove logs every stage's stats at INFO: the asset reports what matters itself.
logger.disable("datatrove")

# LaTeX commands stay whole (\frac, \sqrt), numbers and words are tokens, any other symbol is one.
_TOKEN = re.compile(r"\\[A-Za-z]+|[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def latex_word_tokenizer() -> WordTokenizer:
    """Word tokenizer for math text: datatrove's default (spaCy/NLTK) drops the LaTeX structure."""
    from datatrove.utils.word_tokenizers import WordTokenizer

    class LatexWordTokenizer(WordTokenizer):
        def __init__(self) -> None:
            super().__init__("latex")

        def word_tokenize(self, text: str) -> list[str]:
            return _TOKEN.findall(text)

        def sent_tokenize(self, text: str) -> list[str]:
            return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return [m.span() for m in re.finditer(r"[^.!?]+[.!?]?", text)]

    return LatexWordTokenizer()


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
    n_grams: int, num_buckets: int, hashes_per_bucket: int, seed: int, fold_numbers: bool = False
) -> MinhashConfig:
    # Numbers and symbols carry the meaning of a math problem: the corpus does not fold them
    # away. The contamination audit does (``fold_numbers``): a copy with new numbers is still
    # the same problem.
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.utils.text import TextNormConfig

    norm = TextNormConfig(norm_numbers=fold_numbers, remove_punctuation=False)
    return MinhashConfig(
        n_grams=n_grams,
        num_buckets=num_buckets,
        hashes_per_bucket=hashes_per_bucket,
        seed=seed,
        norm_config=norm,
    )


def find_clusters(
    texts: Iterable[str], config: MinhashConfig, workdir: Path | None = None
) -> dict[int, list[int]]:
    """Near-duplicate clusters of ``texts`` (any iterable: they stream through datatrove's
    on-disk signatures, buckets and union-find, never held at once): cluster id -> the positions
    of its members, sorted; texts in no cluster are absent."""
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        # through a file, not a list: a training corpus of millions never sits in memory
        (tmp / "input").mkdir()
        with open(tmp / "input" / "docs.jsonl", "wb") as f:
            for i, t in enumerate(texts):
                f.write(orjson.dumps({"text": t, "id": str(i)}) + b"\n")
        stages = [
            [
                JsonlReader(str(tmp / "input"), compression=None, add_file_path=False),
                MinhashDedupSignature(
                    output_folder=str(tmp / "sigs"), config=config, language=latex_word_tokenizer()
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
            return {}
        raw = cluster_file.read_bytes()
    members: dict[int, list[int]] = {}
    for doc_idx, cluster in struct.iter_unpack("<II", raw):
        members.setdefault(cluster, []).append(doc_idx)
    return {c: sorted(m) for c, m in sorted(members.items())}


def find_duplicates(
    items: Sequence[DedupItem], config: MinhashConfig, workdir: Path | None = None
) -> list[DuplicateLink]:
    """Cluster near-duplicates; return one link per removed item to the item its cluster keeps."""
    if len(items) < 2:
        return []
    members = find_clusters((it.text for it in items), config, workdir)
    links: list[DuplicateLink] = []
    for cluster, idxs in sorted(members.items()):
        keeper = min(idxs, key=lambda i: (-items[i].priority, items[i].order))
        for i in sorted(idxs):
            if i != keeper:
                links.append(DuplicateLink(items[i].id, items[keeper].id, cluster))
    return links
