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
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from saber_assets.benchmark.data import Benchmark, best_rated
from saber_assets.benchmark.hub import fetch_snapshot
from saber_assets.config import BUNDLED_SOURCES, DATA_DIR, ContaminationConfig, resolve_path
from saber_assets.corpus.dedup import find_clusters, minhash_config
from saber_assets.corpus.sources import Rejected, iter_source, readable
from saber_assets.retrievers.entries import TrainingCorpus
from saber_assets.versions import digest, files_version

# spacing and sizing that changes how a formula looks, never what it says
_SPACING = re.compile(
    r"\\[,;:! ]|\\q?quad(?![A-Za-z])|\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])|~"
)
_FRAC = re.compile(r"\\[dt]frac(?![A-Za-z])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_SPACES = re.compile(r"\s+")

MATCH_SCHEMA = {"item": pl.String, "training_id": pl.String, "how": pl.String}


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
    items: pl.DataFrame,
    training: Iterable[tuple[str, str]],
    config: ContaminationConfig | None = None,
) -> tuple[pl.DataFrame, int]:
    """(matches, training rows read). ``items``: item, text — one row per benchmark item (a
    query's statement, a candidate's problem; ``benchmark_items``); ``training``: (training id,
    statement) pairs, read once. A match is one (item, training row), found ``exact`` or
    ``near``; an item matched both ways is reported as exact."""
    config = config or ContaminationConfig()
    fold = config.fold_numbers
    keys: dict[str, list[int]] = {}
    rows = items.select("item", "text").rows()
    near_items = [near_form(text, fold) for _, text in rows]
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
        out.append((rows[k][0], training_ids[t], how))
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


def benchmark_items(bench: Benchmark) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(items, roles) of a benchmark: ``items`` (item, text) once per id — each query's statement
    and each candidate's problem; ``roles`` (item, role, domain): a query in its domains, a
    candidate in the domains of the queries it is a candidate of."""
    q = bench.queries.select("id", "problem", "candidates", "domains")
    docs = bench.documents.select("id", "problem").with_row_index("row")
    cands = (
        q.select("candidates", "domains")
        .explode("candidates")
        .explode("domains")
        .unique()
        .join(docs, left_on="candidates", right_on="row")
    )
    roles = pl.concat(
        [
            q.select(pl.col("id").alias("item"), pl.lit("query").alias("role"), "domains")
            .explode("domains"),
            cands.select(pl.col("id").alias("item"), pl.lit("candidate").alias("role"),
                         "domains"),
        ]
    ).rename({"domains": "domain"}).unique().sort("role", "item", "domain")  # fmt: skip
    items = pl.concat(
        [q.select(pl.col("id").alias("item"), pl.col("problem").alias("text")),
         cands.select(pl.col("id").alias("item"), pl.col("problem").alias("text"))]
    ).unique("item", keep="first").sort("item")  # fmt: skip
    return items, roles


def overlap_summary(matches: pl.DataFrame, roles: pl.DataFrame) -> pl.DataFrame:
    """Per role and domain (and ``all``): benchmark items, those with a match, their share."""
    flagged = roles.with_columns(pl.col("item").is_in(matches["item"].implode()).alias("hit"))
    per_domain = flagged.group_by("role", "domain").agg(
        pl.len().alias("items"), pl.col("hit").sum().alias("overlapping")
    )
    overall = (
        flagged.unique(["role", "item"])
        .group_by("role")
        .agg(pl.len().alias("items"), pl.col("hit").sum().alias("overlapping"))
        .with_columns(pl.lit("all").alias("domain"))
    )
    return (
        pl.concat([per_domain, overall.select(per_domain.columns)])
        .with_columns(
            pl.col("overlapping").cast(pl.Int64),
            (pl.col("overlapping") / pl.col("items")).alias("share"),
        )
        .sort("role", pl.col("domain") == "all", "domain", descending=[True, False, False])
    )


def query_candidate_pairs(bench: Benchmark) -> pl.DataFrame:
    """(query_id, candidate_id) of every candidate of every query, by id."""
    docs = bench.documents.select("id").with_row_index("row")
    return (
        bench.queries.select(pl.col("id").alias("query_id"), "candidates")
        .explode("candidates")
        .join(docs, left_on="candidates", right_on="row")
        .select("query_id", pl.col("id").alias("candidate_id"))
    )


def minhash_threshold(config: ContaminationConfig) -> float:
    """The Jaccard similarity at which a pair is as likely as not to share a MinHash bucket
    ((1/b)^(1/r) for b buckets of r hashes): the near pass's effective threshold."""
    return (1 / config.num_buckets) ** (1 / config.hashes_per_bucket)


def top_candidates(bench: Benchmark, n: int = 5) -> dict[str, list[str]]:
    """Query id -> the ids of its ``n`` best-rated candidates (ties: the earlier listed first)."""
    doc_ids = bench.documents["id"].to_list()
    return {
        qid: [doc_ids[c] for c in best_rated(cands, scores, n)]
        for qid, cands, scores in bench.queries.select(
            "id", "candidates", "relevance_scores"
        ).iter_rows()
    }


def contaminated_queries(bench: Benchmark, matched: Iterable[str], top: int = 5) -> set[str]:
    """The queries whose statement or any of their ``top`` best-rated candidates is among the
    ``matched`` items (of a training corpus)."""
    matched = set(matched)
    return {
        qid
        for qid, best in top_candidates(bench, top).items()
        if qid in matched or matched.intersection(best)
    }


# ---------------------------------------------------------------------- training corpora


def checked_corpora(entries) -> dict[str, TrainingCorpus]:
    """Every training corpus with text the registry declares, by name (one ``contamination``
    partition each); one name declared with two different texts is an error naming both."""
    out: dict[str, tuple[TrainingCorpus, str]] = {}
    for e in entries:
        for t in e.meta.training_data:
            if isinstance(t, str) or not t.checkable():
                continue
            if t.name in out and out[t.name][0] != t:
                raise ValueError(
                    f"training corpus {t.name!r} is declared differently by {out[t.name][1]!r} "
                    f"and {e.name!r}: one name, one text (rename one of them)"
                )
            out.setdefault(t.name, (t, e.name))
    return {name: t for name, (t, _) in sorted(out.items())}


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


def corpus_files(
    corpus: TrainingCorpus, fetch: Callable[[str, str | None], tuple[Path, str]] | None = None
) -> tuple[list[Path], str | None]:
    """(the files a training corpus is read from, the Hub revision they came from): a bundled
    source's file, a local file, every ``*.parquet`` / ``*.jsonl*`` under a local folder, or the
    Parquet files of a Hub dataset snapshot (``fetch``: the Hub reader's; tests pass a fake)."""
    if corpus.bundled is not None:
        return [DATA_DIR / BUNDLED_SOURCES[corpus.bundled][0]], None
    if corpus.path is not None:
        path = resolve_path(corpus.path)
        if path.is_dir():
            files = sorted(f for f in path.rglob("*") if f.is_file() and readable(f))
            if not files:
                raise ValueError(
                    f"training corpus {corpus.name!r}: no Parquet or JSONL file under {path}"
                )
            return files, None
        return [path], None
    if corpus.hub is not None:
        repo, _, revision = corpus.hub.partition("@")
        folder, sha = (fetch or fetch_snapshot)(repo, revision or None)
        return sorted(Path(folder).glob("data/**/*.parquet")), sha
    raise ValueError(f"training corpus {corpus.name!r}: declared by name only, no text to read")


@dataclass
class TrainingRead:
    """What reading a training corpus met: rows read, rows it could not use (with reasons)."""

    rows: int = 0
    rejected: list[tuple[str, int, str]] = field(default_factory=list)  # file, line, reason


def training_rows(
    corpus: TrainingCorpus, files: Sequence[Path], read: TrainingRead
) -> Iterator[tuple[str, str]]:
    """(native id, problem) of a training corpus's rows under its ``id_prefix``, streamed; a row
    that cannot be read, or has no problem text, is counted in ``read.rejected`` with its reason
    (never silently dropped)."""
    mapping = corpus.mapping()
    for path in files:
        for row in iter_source(corpus.name, path, mapping):
            if isinstance(row, Rejected):
                read.rejected.append((path.name, row.line, row.reason))
                continue
            native = str(row.record.get(mapping["id"], row.line))
            if corpus.id_prefix and not native.startswith(corpus.id_prefix):
                continue
            problem = row.record.get(mapping["problem"])
            if not isinstance(problem, str) or not problem.strip():
                read.rejected.append(
                    (path.name, row.line, f"{mapping['problem']!r} empty or not text")
                )
                continue
            read.rows += 1
            yield native, problem


def training_corpus_version(corpus: TrainingCorpus) -> str:
    """The data version of a training corpus: its declaration and its local files' contents (a
    Hub corpus: its declaration, whose ``@revision`` pins it)."""
    decl = corpus.model_dump()
    if corpus.hub is not None:
        return digest(decl)
    try:
        files = corpus_files(corpus)[0]
    except ValueError as exc:
        return digest([decl, str(exc)])
    return digest([decl, files_version({str(f): f for f in files})])


# ---------------------------------------------------------------------- the leaderboard's view


def audited_items(root: Path) -> dict[str, set[str]]:
    """Training corpus name -> the benchmark items its last audit matched (the audits under
    ``root``, one folder per corpus)."""
    if not root.is_dir():
        return {}
    return {
        d.name: set(pl.read_parquet(d / "matches.parquet")["item"].to_list())
        for d in sorted(root.iterdir())
        if (d / "matches.parquet").exists()
    }


def own_matched_queries(root: Path) -> set[str]:
    """The queries with a rephrasing of themselves among their candidates (the benchmark's
    ``own_candidate_matches``; none when it was not built)."""
    path = root / "own_candidate_matches.parquet"
    return set(pl.read_parquet(path)["query"].to_list()) if path.exists() else set()
