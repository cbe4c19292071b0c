"""The contamination audit's assets: the declared training corpora (observed, one partition
each), the benchmark items found in each, and the queries with a rephrasing of themselves among
their own candidates."""

import json
import resource
import time

import polars as pl
from dagster import (
    AssetExecutionContext,
    DataVersionsByPartition,
    MaterializeResult,
    MetadataValue,
)

from saber_assets.benchmark.data import Benchmark
from saber_assets.contamination.matches import (
    TrainingRead,
    audit,
    benchmark_items,
    checked_corpora,
    contaminated_queries,
    corpus_files,
    minhash_threshold,
    overlap_summary,
    own_candidate_hits,
    query_candidate_pairs,
    training_corpus_version,
    training_rows,
)
from saber_assets.lib.declare import source_asset, stage_asset
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.lib.partitions import training_partitions
from saber_assets.outputs import write_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.registry import load_registry


@source_asset(partitions_def=training_partitions)
def training_corpora(context, pipeline: PipelineResource) -> DataVersionsByPartition:
    """One declared training corpus per `training_corpus` partition: its data version hashes
    the declaration and its local files, so a changed file re-audits only that corpus."""
    have = set(context.instance.get_dynamic_partitions(training_partitions.name))
    corpora = checked_corpora(load_registry(pipeline.registry_path()))
    return DataVersionsByPartition(
        {k: training_corpus_version(c) for k, c in corpora.items() if k in have}
    )


@stage_asset(
    reads=("contamination.own_match_jaccard",), kinds={"parquet"}, deps=["evaluation_benchmark"]
)
def own_candidate_matches(pipeline: PipelineResource) -> MaterializeResult:
    """Queries whose rephrasing is among their own candidates (word 3-gram Jaccard at least
    ``contamination.own_match_jaccard`` after folding): an easy, meaningless hit the
    corpus stage's dedup let through; with ``exclude_own_matches`` the leaderboard leaves them
    out."""
    cfg = pipeline.load().contamination
    bench = Benchmark.read(pipeline.outputs().evaluation_benchmark)
    texts = dict(bench.documents.select("id", "problem").iter_rows())
    texts |= dict(bench.queries.select("id", "problem").iter_rows())
    hits = own_candidate_hits(query_candidate_pairs(bench), texts, cfg.own_match_jaccard)
    out = pipeline.outputs().contamination
    out.mkdir(parents=True, exist_ok=True)
    write_whole(out / "own_candidate_matches.parquet", hits)
    return MaterializeResult(
        metadata={
            **stage_metadata(hits.height),
            "queries": hits["query"].n_unique(),
            "of_queries": bench.queries.height,
            "jaccard_at_least": cfg.own_match_jaccard,
            "excluded_from_leaderboard": cfg.exclude_own_matches,
            "matches": markdown_table(hits.with_columns(pl.col("jaccard").round(3)), max_rows=50),
        }
    )


@stage_asset(
    reads=tuple(
        f"contamination.{key}"
        for key in ("fold_numbers", "n_grams", "num_buckets", "hashes_per_bucket", "seed")
    ),
    kinds={"parquet", "datatrove"},
    deps=["evaluation_benchmark", training_corpora],
)
def contamination(context: AssetExecutionContext, pipeline: PipelineResource) -> MaterializeResult:
    """One declared training corpus, streamed against the benchmark's query statements and
    candidate problems: exact matches of the folded statement and MinHash near-duplicates
    (numbers folded); per corpus the matched items with their training row, the shares per
    role and domain, and the queries that count as contaminated on the leaderboard."""
    cfg = pipeline.load().contamination
    name = context.partition_key
    corpora = checked_corpora(load_registry(pipeline.registry_path()))
    if name not in corpora:
        raise ValueError(
            f"training corpus {name!r} is no longer declared with text in the registry: its "
            "earlier audit is kept, nothing to run"
        )
    corpus = corpora[name]
    bench = Benchmark.read(pipeline.outputs().evaluation_benchmark)
    items, roles = benchmark_items(bench)
    files, revision = corpus_files(corpus)
    t0 = time.perf_counter()
    read = TrainingRead()
    matches, _ = audit(items, training_rows(corpus, files, read), cfg)
    seconds = time.perf_counter() - t0
    matches = matches.join(
        roles.group_by("item").agg(pl.col("role").unique().sort().str.join(", ").alias("roles")),
        on="item",
        how="left",
    )
    summary = overlap_summary(matches, roles)
    queries = sorted(contaminated_queries(bench, matches["item"], cfg.top_candidates))
    out = pipeline.outputs().contamination / name
    out.mkdir(parents=True, exist_ok=True)
    write_whole(out / "matches.parquet", matches)
    write_whole(out / "summary.parquet", summary)
    rejected = pl.DataFrame(
        read.rejected, schema={"file": pl.String, "line": pl.Int64, "reason": pl.String},
        orient="row",
    )  # fmt: skip
    write_whole(out / "rejected.csv", rejected)
    audit_record = {
        "corpus": corpus.model_dump(exclude_none=True),
        "hub_revision": revision,
        "files": [str(f) for f in files],
        "training_rows": read.rows,
        "rejected_rows": len(read.rejected),
        "exact": "the folded statement (NFC, lower case, LaTeX spacing and whitespace dropped"
        + (", numbers as 0" if cfg.fold_numbers else "")
        + ") equal",
        "near": {
            "n_grams": cfg.n_grams,
            "num_buckets": cfg.num_buckets,
            "hashes_per_bucket": cfg.hashes_per_bucket,
            "seed": cfg.seed,
            "fold_numbers": cfg.fold_numbers,
            "approx_jaccard_threshold": round(minhash_threshold(cfg), 3),
        },
        "top_candidates": cfg.top_candidates,
        "contaminated_queries": queries,
    }
    write_whole(out / "audit.json", json.dumps(audit_record, indent=1))
    if read.rejected:
        context.log.warning(
            f"{name}: {len(read.rejected)} training rows could not be used (see rejected.csv)"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return MaterializeResult(
        metadata={
            **stage_metadata(matches.height, seconds=seconds),
            "training_rows": read.rows,
            "rejected_rows": len(read.rejected),
            "matched_items": matches["item"].n_unique(),
            "exact_matches": int((matches["how"] == "exact").sum()),
            "contaminated_queries": len(queries),
            "contaminated_share": round(len(queries) / max(bench.queries.height, 1), 4),
            "overlap": markdown_table(summary.with_columns(pl.col("share").round(4))),
            "thresholds": MetadataValue.json(audit_record["near"]),
            "process_peak_rss_gb": round(peak, 2),
            "path": MetadataValue.path(str(out)),
        }
    )
