"""benchmark stage: the exchange-format export of the built benchmark, and the benchmark to score."""

import time
import zlib
from pathlib import Path

import numpy as np
import polars as pl
from dagster import AssetExecutionContext, Failure, MaterializeResult, MetadataValue

from saber_assets.benchmark.data import (
    EXPORTED_JUDGMENT_SCHEMA,
    QUERY_SCHEMA,
    Benchmark,
    failed_check_lines,
)
from saber_assets.candidates.coverage import below_quota, domain_coverage
from saber_assets.corpus.build import corpus_version
from saber_assets.io_managers import concat_partitions
from saber_assets.lib.declare import ACCEPT_FAILED_CHECKS_TAG, stage_asset
from saber_assets.lib.metadata import markdown_table
from saber_assets.ontology.domains import domain_names
from saber_assets.pipeline import PipelineResource
from saber_assets.tournament.engine import order_consistency, position_bias


def shuffled_order(n: int, seed: int, query_id: str) -> np.ndarray:
    """The exported order of a query's candidates (seeded by the pipeline seed and the query)."""
    return np.random.default_rng([seed, zlib.crc32(query_id.encode()), 1]).permutation(n)


def judges_used(judgments: pl.DataFrame) -> list[dict]:
    """Which judge configurations produced the judgments: judge, prompt version, token budget."""
    if judgments.height == 0:
        return []
    if "max_tokens" not in judgments.columns:
        judgments = judgments.with_columns(pl.lit(None, dtype=pl.Int32).alias("max_tokens"))
    return (
        judgments.group_by("judge", "prompt_version", "max_tokens")
        .agg(pl.len().alias("judgments"), pl.col("winner").is_null().sum().alias("failures"))
        .sort("judge", "prompt_version")
        .to_dicts()
    )


def exported_judgments(
    judgments: pl.DataFrame, queries: pl.DataFrame, row_of: dict[str, int]
) -> pl.DataFrame:
    """The judgments the benchmark's grades were fitted to, in the exchange format: candidates
    as document rows, one row per (query, round, pair)."""
    if judgments.height == 0 or queries.height == 0:
        return pl.DataFrame(schema=EXPORTED_JUDGMENT_SCHEMA)
    kept = judgments.unique(["query", "round", "a", "b"], keep="first").filter(
        pl.col("query").is_in(queries["id"].implode())
    )
    if "swapped_winner" not in kept.columns:
        kept = kept.with_columns(pl.lit(None, pl.String).alias("swapped_winner"))
    if "domain" not in kept.columns:
        kept = kept.with_columns(pl.lit(None, pl.String).alias("domain"))

    def row(c: str | None) -> int | None:
        return None if c is None else row_of[c]

    rows = [
        (q, r, row_of[f], row_of[b if f == a else a], row(w), row(o), d)
        for q, r, a, b, f, w, o, d in kept.sort("query", "round", "a", "b")
        .select("query", "round", "a", "b", "shown_first", "winner", "swapped_winner", "domain")
        .iter_rows()
    ]
    return pl.DataFrame(rows, schema=EXPORTED_JUDGMENT_SCHEMA, orient="row")


@stage_asset(reads=("seed", "benchmark"), kinds={"parquet"})
def benchmark_export(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    corpus: pl.DataFrame,
    problem_annotations: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
    relevance_thresholds: pl.DataFrame,
    tournament_judgments: dict[str, pl.DataFrame],
) -> MaterializeResult:
    """The built benchmark in the exchange format (queries, documents, manifest). Refused
    while a check of its grades failed at ERROR severity (the judge's position bias in any
    domain), unless the run carries ``ACCEPT_FAILED_CHECKS_TAG``: nothing is published on
    grades that follow the order the judge was shown."""
    cfg = pipeline.load()
    checks = judge_checks(tournament_judgments, tuple(cfg.tournament.position_bias_band))
    failed = failed_check_lines(checks)
    if failed and context.run.tags.get(ACCEPT_FAILED_CHECKS_TAG) != "true":
        raise Failure(
            description="refused: the grades come from judgments whose check failed: "
            + "; ".join(failed)
            + ". Fix the cause (another judge, `tournament.both_orders`), or build with "
            "--accept-failed-checks (the manifest then records the failure)"
        )
    ratings = concat_partitions(relevance_ratings)
    queries = benchmark_queries(ratings, corpus, problem_annotations, domain_names(cfg.ontology),
                                cfg.seed)  # fmt: skip
    documents = corpus.select("id", "problem", "solution")
    selected = (
        dict(ratings.group_by("domain").agg(pl.col("query_id").n_unique()).iter_rows())
        if ratings.height
        else {}
    )
    coverage = domain_coverage(
        problem_annotations, relevance_thresholds, selected, cfg.candidates.quota_per_domain,
        cfg.candidates.require_annotations,
    )  # fmt: skip
    manifest = benchmark_manifest(cfg, corpus, relevance_thresholds, coverage, checks,
                                  judges_used(concat_partitions(tournament_judgments)))  # fmt: skip
    # each judgment with the domain partition it was made in: the checks' domains (verify
    # recounts each domain's position bias from them)
    by_domain = (
        pl.concat([f.with_columns(pl.lit(key).alias("domain"))
                   for key, f in sorted(tournament_judgments.items())], how="diagonal_relaxed")
        if isinstance(tournament_judgments, dict) and tournament_judgments
        else concat_partitions(tournament_judgments)
    )  # fmt: skip
    row_of = {i: k for k, i in enumerate(corpus["id"].to_list())}
    judgments = exported_judgments(by_domain, queries, row_of)
    agree, both, _, _ = order_consistency(judgments)
    manifest["order_consistency"] = {"agree": agree, "both": both}
    bench = Benchmark(queries, documents, manifest, judgments=judgments)
    bench.validate("built benchmark")
    path = bench.write(pipeline.outputs().benchmark)
    return MaterializeResult(
        metadata={
            "queries": queries.height,
            "documents": documents.height,
            "judgments": judgments.height,
            "path": MetadataValue.path(str(path)),
            "judge_backend": cfg.llm.judge_backend,
            "domains_below_quota": below_quota(coverage).height,
            "coverage": markdown_table(coverage),
            "manifest": MetadataValue.json(manifest),
        }
    )


def judge_checks(
    tournament_judgments: dict[str, pl.DataFrame] | pl.DataFrame, band: tuple[float, float]
) -> list[dict]:
    """Per domain, the judge's position-bias check (``judge_position_bias``) over the judgments
    the grades came from: check, domain, passed, severity, description."""
    parts = (
        tournament_judgments
        if isinstance(tournament_judgments, dict)
        else {"all": tournament_judgments}
    )
    out = []
    for key in sorted(parts):
        bias = position_bias(parts[key], band)
        out.append({"check": "judge_position_bias", "domain": key, "passed": not bias.biased,
                    "severity": "ERROR", "description": bias.describe(),
                    # the counts the verdict is decided from (`saber verify` re-decides it)
                    "first_wins": bias.first_wins, "decided": bias.decided})  # fmt: skip
    return out


@stage_asset(reads=("seed", "benchmark"), kinds={"parquet"}, deps=["benchmark_export"])
def evaluation_benchmark(pipeline: PipelineResource) -> MaterializeResult:
    """The benchmark the retrievers are scored on: the built one, or any exchange-format directory
    given as ``benchmark.path`` (validated on import)."""
    src = pipeline.load().benchmark.path
    path = pipeline.outputs().benchmark if src is None else Path(src).expanduser()
    bench = Benchmark.read(path)
    out = bench.write(pipeline.outputs().evaluation_benchmark)
    per_domain = (
        bench.queries.select(pl.col("domains").explode()).group_by("domains").len().sort("domains")
    )
    return MaterializeResult(
        metadata={
            "source": str(path),
            "queries": bench.queries.height,
            "documents": bench.documents.height,
            "candidates_per_query": int(bench.queries["candidates"].list.len().median() or 0),
            "per_domain": markdown_table(per_domain),
            "path": MetadataValue.path(str(out)),
        }
    )


def benchmark_queries(ratings: pl.DataFrame, corpus: pl.DataFrame,
                      problem_annotations: pl.DataFrame, domain_order: list[str],
                      seed: int) -> pl.DataFrame:  # fmt: skip
    """Each rated query as the exchange format holds it: its texts, its candidates (corpus rows,
    in a seeded shuffle: they are selected group by group) with their grades, its domains in
    the ontology's order."""
    row_of = {i: k for k, i in enumerate(corpus["id"].to_list())}
    text = {r[0]: (r[1], r[2]) for r in corpus.select("id", "problem", "solution").iter_rows()}
    dom = dict(
        zip(
            problem_annotations["id"].to_list(),
            problem_annotations["domains"].to_list(),
            strict=True,
        )
    )
    q_rows = []
    if ratings.height:
        for (qid,), frame in ratings.sort("query_id", "position").group_by(
            "query_id", maintain_order=True
        ):
            domains = list(
                dict.fromkeys([*frame["domain"].unique().to_list(), *(dom.get(qid) or [])])
            )
            # candidates are selected group by group; a seeded shuffle hides that order
            frame = frame[shuffled_order(frame.height, seed, qid)]
            q_rows.append(
                {
                    "id": qid,
                    "problem": text[qid][0],
                    "solution": text[qid][1],
                    "candidates": [row_of[c] for c in frame["candidate_id"]],
                    "relevance_scores": frame["rating"].to_list(),
                    "domains": [d for d in domain_order if d in domains],
                }
            )
    return pl.DataFrame(q_rows, schema=QUERY_SCHEMA)


def benchmark_manifest(cfg, corpus: pl.DataFrame, relevance_thresholds: pl.DataFrame,
                       coverage: pl.DataFrame, checks: list[dict], judges: list) -> dict:  # fmt: skip
    """The manifest: what the benchmark was built from and with, its coverage and its checks."""
    return {
        "name": cfg.name,
        "corpus_version": corpus_version(corpus),
        "judge_backend": cfg.llm.judge_backend,
        "judge_model": cfg.llm.model,
        "judges": judges,
        "seed": cfg.seed,
        "domains": domain_names(cfg.ontology),
        "candidate_order": f"shuffled per query: numpy default_rng([{cfg.seed}, crc32(query id), 1])",
        "thresholds": {
            "topic": float(relevance_thresholds["topic_threshold"][0]),
            "summary": float(relevance_thresholds["summary_threshold"][0]),
            "source": relevance_thresholds["source"][0],
        },
        "candidates_per_group": cfg.candidates.candidates_per_group,
        "quota_per_domain": cfg.candidates.quota_per_domain,
        # per domain: problems, annotated, viable, queries, quota, status (candidates.coverage)
        "coverage": coverage.to_dicts(),
        "tournament": cfg.tournament.model_dump(),
        # the fit judgments.parquet regrades under (leaderboard/joint.py)
        "ratings": {
            "prior": cfg.ratings.prior,
            "c": cfg.ratings.c,
            "alpha": cfg.tournament.alpha,
            "soft": cfg.tournament.policy == "efficient",
            "both_orders": cfg.tournament.both_orders,
        },  # fmt: skip
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # the ERROR-severity checks of what the grades were built from: `saber push` refuses a
        # benchmark with a failed one unless told to publish it anyway (the card then says so)
        "checks": checks,
    }
