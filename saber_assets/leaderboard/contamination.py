"""Contamination, measured on the text: which benchmark items (query statements, candidate
problems) occur in a training corpus, and which queries have a rephrasing of themselves among
their own candidates.

Two passes over a training corpus that streams (never held in memory, as the corpus stage's
dedup streams through datatrove's on-disk signatures):
- exact: the statement folded (NFC, lower case, LaTeX spacing and sizing commands and all
  whitespace dropped, ``\\dfrac``/``\\tfrac`` as ``\\frac``, numbers as 0 when ``fold_numbers``)
  equal to a benchmark item's;
- near: MinHash clusters (the corpus stage's ``dedup.find_clusters``, numbers folded too) that
  hold a benchmark item and a training row.
A copy with new numbers is still the same problem, so numbers fold by default (configurable).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import polars as pl

from saber_assets.corpus.dedup import find_clusters, minhash_config
from saber_assets.corpus.sources import read_source
from saber_assets.leaderboard.retrievers.registry import TrainingCorpus
from saber_assets.settings import SourceConfig

# spacing and sizing that changes how a formula looks, never what it says
_SPACING = re.compile(
    r"\\[,;:! ]|\\q?quad(?![A-Za-z])|\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])|~"
)
_FRAC = re.compile(r"\\[dt]frac(?![A-Za-z])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")

MATCH_SCHEMA = {
    "item": pl.String, "role": pl.String, "domain": pl.String, "training_id": pl.String,
    "how": pl.String,
}  # fmt: skip


@dataclass(frozen=True)
class AuditConfig:
    n_grams: int = 5
    num_buckets: int = 14
    hashes_per_bucket: int = 8
    seed: int = 1
    fold_numbers: bool = True


def near_form(text: str, fold_numbers: bool = True) -> str:
    """The text MinHash reads: LaTeX spacing gone, fractions one command, numbers 0."""
    text = unicodedata.normalize("NFC", text).lower()
    text = _FRAC.sub(r"\\frac", _SPACING.sub(" ", text))
    if fold_numbers:
        text = _NUMBER.sub("0", text)
    return _SPACES.sub(" ", text).strip()


def exact_key(near: str) -> str:
    """The key of the exact pass: the near form without any whitespace."""
    return _SPACES.sub("", near)


def exact_form(text: str, fold_numbers: bool = True) -> str:
    return exact_key(near_form(text, fold_numbers))


def audit(
    items: pl.DataFrame, training: Iterable[tuple[str, str]], config: AuditConfig = AuditConfig()
) -> tuple[pl.DataFrame, int]:
    """(matches, training rows read). ``items``: item, role (query / candidate), domain, text —
    one row per benchmark item and role; ``training``: (training id, statement) pairs, read
    once. A match is one (item, training row), found ``exact`` or ``near``; an item matched both
    ways is reported as exact."""
    fold = config.fold_numbers
    keys: dict[str, list[int]] = {}
    rows = items.select("item", "role", "domain", "text").rows()
    near_items = [near_form(text, fold) for _, _, _, text in rows]
    for k, near in enumerate(near_items):
        keys.setdefault(exact_key(near), []).append(k)
    training_ids: list[str] = []
    exact: set[tuple[int, int]] = set()

    def texts() -> Iterator[str]:
        yield from near_items
        for tid, text in training:
            near = near_form(text, fold)  # once per row: it is also the exact pass's key
            for k in keys.get(exact_key(near), ()):
                exact.add((k, len(training_ids)))
            training_ids.append(str(tid))
            yield near

    cfg = minhash_config(
        config.n_grams, config.num_buckets, config.hashes_per_bucket, config.seed, fold
    )
    clusters = find_clusters(texts(), cfg)
    near: set[tuple[int, int]] = set()
    n = len(rows)
    for members in clusters.values():
        ours = [m for m in members if m < n]
        theirs = [m - n for m in members if m >= n]
        near.update((k, t) for k in ours for t in theirs)
    out = []
    for (k, t), how in [*((p, "exact") for p in sorted(exact)),
                        *((p, "near") for p in sorted(near - exact))]:  # fmt: skip
        item, role, domain, _ = rows[k]
        out.append((item, role, domain, training_ids[t], how))
    return pl.DataFrame(out, schema=MATCH_SCHEMA, orient="row"), len(training_ids)


def shingles(text: str, n: int = 3) -> set[str]:
    words = near_form(text).split()
    return {" ".join(words[i : i + n]) for i in range(max(1, len(words) - n + 1))}


def own_candidate_hits(
    candidates: pl.DataFrame, texts: dict[str, str], threshold: float = 0.5
) -> pl.DataFrame:
    """Queries whose near-duplicate is among their own candidates: (query, candidate, jaccard)
    for every query–candidate pair (``candidates``: query_id, candidate_id) whose word 3-gram
    Jaccard, after the audit's folding, is at least ``threshold`` — a rephrasing the corpus
    stage's dedup (MinHash at ~0.8) let through, an easy and meaningless hit."""
    cache: dict[str, set[str]] = {}

    def grams(i: str) -> set[str]:
        if i not in cache:
            cache[i] = shingles(texts[i])
        return cache[i]

    out = []
    for q, c in (
        candidates.select("query_id", "candidate_id")
        .unique()
        .sort("query_id", "candidate_id")
        .iter_rows()
    ):
        if q not in texts or c not in texts:
            continue
        a, b = grams(q), grams(c)
        j = len(a & b) / len(a | b) if a | b else 0.0
        if j >= threshold:
            out.append((q, c, j))
    return pl.DataFrame(
        out,
        schema={"query": pl.String, "candidate": pl.String, "jaccard": pl.Float64},
        orient="row",
    )


def training_corpus_source(corpus: TrainingCorpus) -> SourceConfig | None:
    """The corpus-source config that reads a training corpus's local text (None: a Hub id or
    a name alone, which this reader does not open)."""
    if corpus.path is None and corpus.bundled is None:
        return None
    return SourceConfig(name=corpus.name, path=corpus.path, bundled=corpus.bundled,
                        fields=corpus.fields)  # fmt: skip


def training_rows(corpus: TrainingCorpus) -> Iterator[tuple[str, str]]:
    """(native id, problem) of a training corpus's readable rows, those under its ``id_prefix``;
    a row without a problem is skipped (it cannot match a statement)."""
    source = training_corpus_source(corpus)
    if source is None:
        raise ValueError(f"training corpus {corpus.name!r}: no local text to read")
    mapping = source.field_mapping()
    read = read_source(corpus.name, source.file(), mapping)
    for row in read.rows:
        native = str(row.record.get(mapping["id"], row.line))
        problem = row.record.get(mapping["problem"])
        if corpus.id_prefix and not native.startswith(corpus.id_prefix):
            continue
        if isinstance(problem, str) and problem.strip():
            yield native, problem


def declared_training(entries) -> dict[str, dict[str, TrainingCorpus | None]]:
    """Retriever name -> its declared training corpora by name: the corpus where it carries
    text to check, None where it is declared, not checked."""
    out = {}
    for e in entries:
        decl = {}
        for t in e.meta.training_data:
            if isinstance(t, str):
                decl[t] = None
            else:
                decl[t.name] = t if t.checkable() else None
        out[e.name] = decl
    return out
