"""Analyses of the built benchmark (group `analyses`): each a thin asset over a pure module."""

from __future__ import annotations

import polars as pl
from dagster import AssetKey, MetadataValue, Output

from saber_assets.analyses import robustness as rb
from saber_assets.analyses.composition import composition, shares_figure
from saber_assets.analyses.math_vs_words import (
    choose_retrievers,
    llm_segment,
    math_vs_words_section,
    wins_figure,
)
from saber_assets.analyses.math_vs_words import math_vs_words as math_vs_words_table
from saber_assets.analyses.mteb import STATS_SCHEMA, mteb_figure, mteb_section, read_scores
from saber_assets.analyses.mteb import mteb_correlation as mteb_correlation_table
from saber_assets.analyses.robustness import robustness_figure
from saber_assets.analyses.second_judge import second_judge
from saber_assets.analyses.signal_groups import (
    area_under,
    curves_figure,
    group_curves,
    signal_groups_section,
)
from saber_assets.benchmark.data import Benchmark
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.board import Board
from saber_assets.lib.declare import JUDGE_READS, analysis
from saber_assets.lib.metadata import (
    figure_markdown,
    llm_metadata,
    markdown_table,
    stage_metadata,
)
from saber_assets.lib.tasks import prepared_tasks, tasks_for
from saber_assets.pipeline import PipelineResource
from saber_assets.ratings.rate import configured_prior
from saber_assets.retrievers.discovery import registry_for
from saber_assets.retrievers.registry import (
    RetrieverResources,
    build_retriever,
)
from saber_assets.runs.evaluate import rescore_runs
from saber_assets.runs.files import stored_runs
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource


@analysis(section=signal_groups_section, reads=())
def signal_group_curves(relevance_ratings: dict[str, pl.DataFrame]) -> Output[pl.DataFrame]:
    """Cumulative fraction of each candidate group (topic-only, summary-only, both) within the
    top r of the final ratings, over all queries and per domain."""
    curves = group_curves(concat_partitions(relevance_ratings))
    return Output(
        curves,
        metadata={
            **stage_metadata(curves.height),
            "area_under_curve": markdown_table(area_under(curves)),
            "plot": figure_markdown(curves_figure(curves), "signal group curves"),
        },
    )


@analysis(
    reads=(),
    deps=[AssetKey("benchmark_export")],
)
def benchmark_composition(
    pipeline: PipelineResource,
    problem_annotations: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """Domain and sub-domain shares of the queries and the documents (first and second tree
    levels), source shares, and the candidate groups' sizes."""
    bench = Benchmark.read(pipeline.outputs().benchmark)
    tables = composition(
        bench.queries,
        bench.documents,
        problem_annotations,
        ontology_tree,
        concat_partitions(relevance_ratings),
    )
    domains = tables["domains"]
    return Output(
        domains,
        metadata={
            **stage_metadata(domains.height),
            "queries_by_subdomain": markdown_table(domains.filter(pl.col("of") == "queries")),
            "documents_by_subdomain": markdown_table(domains.filter(pl.col("of") == "documents")),
            "sources": markdown_table(tables["sources"]),
            "candidate_groups": markdown_table(tables["groups"]),
            "plot": figure_markdown(shares_figure(tables), "benchmark composition"),
            "queries": bench.queries.height,
            "documents": bench.documents.height,
            "note": MetadataValue.text(
                "a problem counts once in every sub-domain it is annotated with"
            ),
        },
    )


@analysis(
    section=mteb_section,
    reads=("analyses.mteb_scores", "analyses.model_names", "analyses.recent_models"),
    deps=[AssetKey("leaderboard")],
)
def mteb_correlation(pipeline: PipelineResource) -> Output[pl.DataFrame]:
    """Pearson and Spearman (with 95% CIs) between the leaderboard's nDCG@10 and the MTEB
    retrieval scores of `analyses.mteb_scores`, per setting, for all matched models and for
    `analyses.recent_models`. Without a scores file: empty, with a note saying so."""
    acfg = pipeline.load().analyses
    board = Board.read_table(pipeline.outputs().leaderboard)
    if acfg.mteb_scores is None:
        empty = pl.DataFrame(schema=STATS_SCHEMA)
        note = "no analyses.mteb_scores file configured: nothing to correlate"
        return Output(empty, metadata={**stage_metadata(0), "note": note})
    matched, table = mteb_correlation_table(
        board, read_scores(acfg.mteb_scores), acfg.model_names, acfg.recent_models
    )
    unmatched = sorted(set(board["retriever"]) - set(matched["retriever"]))
    meta = {
        **stage_metadata(table.height),
        "correlations": markdown_table(table),
        "matched_models": matched["model"].n_unique(),
        "unmatched_retrievers": ", ".join(unmatched) or "none",
    }
    if matched.height:
        meta["plot"] = figure_markdown(mteb_figure(matched), "MTEB vs benchmark")
    return Output(table, metadata=meta)


@analysis(
    section=math_vs_words_section,
    reads=(*JUDGE_READS, "retrievers", "analyses.math_vs_words_retrievers",
           "analyses.math_vs_words_settings", "analyses.math_segmentation"),
    deps=[AssetKey("evaluation_benchmark")],
    pool="llm",
)  # fmt: skip
def math_vs_words(
    pipeline: PipelineResource, llm: LLMResource, stores: StoresResource
) -> Output[pl.DataFrame]:
    """Per retriever, setting and domain: the share of queries whose math-only variant (LaTeX
    spans) is closer to the query's 5 best-rated candidates than its words-only variant, with
    the math-token ratio; queries with either side empty are dropped and counted."""
    cfg = pipeline.load()
    acfg = cfg.analyses
    entries = registry_for(cfg, stores.db())
    wanted = acfg.math_vs_words_retrievers
    chosen, not_run = choose_retrievers(entries, wanted, acfg.math_vs_words_settings)
    resources = RetrieverResources.from_stores(stores.db(), entries)
    retrievers = {e.name: build_retriever(e, resources) for e in chosen}
    bench = Benchmark.read(pipeline.outputs().evaluation_benchmark)
    segmenter = None
    how = acfg.math_segmentation
    if how == "auto":
        how = "latex" if llm.backend in ("cpu", "synthetic") else "llm"
    if how == "llm":
        segmenter = tasks_for(llm, stores, cfg.tournament.max_parse_retries).segmenter
        if segmenter is None:
            raise ValueError(
                "analyses.math_segmentation: llm needs an LLM backend (llm.backend is cpu); "
                "use latex or configure vllm/openai"
            )
    per_query, summary = math_vs_words_table(
        bench.queries, bench.documents, retrievers, tuple(acfg.math_vs_words_settings),
        segment=segmenter and llm_segment(segmenter),
        settings_of={e.name: e.settings for e in chosen if e.settings is not None},
    )  # fmt: skip
    return Output(
        summary,
        metadata={
            **stage_metadata(summary.height),
            "math_wins": markdown_table(summary, max_rows=60),
            "retrievers": ", ".join(retrievers),
            "not_run": MetadataValue.json(dict(not_run)),
            "dropped_queries": int(
                per_query.filter(pl.col("dropped")).select(pl.col("query_id").n_unique()).item()
            ),
            "failed": int(per_query["error"].is_not_null().sum()),
            "segmentation": how,
            "plot": figure_markdown(wins_figure(summary), "math vs words")
            if summary.height
            else "no queries",
            **(llm_metadata({"math_split": segmenter}) if segmenter is not None else {}),
        },
    )


def registered_runs(pipeline: PipelineResource) -> pl.DataFrame:
    """Every registered retriever's stored runs (the files the leaderboard read)."""
    names = [e.name for e in registry_for(pipeline.load(), home=pipeline.home_dir())]
    cols = ["query_id", "setting", "domains", "failed", "scores", "ndcg"]
    return stored_runs(pipeline.outputs().runs, names, cols)


@analysis(
    section=rb.robustness_section,
    reads=(*JUDGE_READS, "robustness", "ratings", "leaderboard.k"),
    deps=[AssetKey("leaderboard")],
    pool="llm",
)
def leaderboard_robustness(
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
    tournament_judgments: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """How robust the leaderboard's ordering is, per setting: Kendall τ to it under linear gain,
    ratings on [0, 3], rating ranks, a second judge on a seeded share of the tournament's pairs
    (ratings of the affected queries refitted) and halves of the queries; the flipped pairs."""
    cfg = pipeline.load()
    rcfg = cfg.robustness
    bench = Benchmark.read(pipeline.outputs().evaluation_benchmark)
    runs = registered_runs(pipeline)
    rel = bench.relevance()
    judge_rel, agree, n_pairs, label = None, None, 0, ""
    if rcfg.judge_share > 0 and cfg.benchmark.path is None:  # our own tournament only
        ratings = concat_partitions(relevance_ratings)
        judgments = concat_partitions(tournament_judgments).unique(
            ["query", "a", "b", "round"], keep="first"
        )
        tasks, text = prepared_tasks(pipeline, llm, stores, corpus, ratings)
        judge, swap, label = second_judge(pipeline, llm, stores, tasks)
        if hasattr(judge, "evidence") and judge is not tasks.pair_judge:
            judge.evidence.update(tasks.pair_judge.evidence)  # the same pair signals to weigh
        rel, judge_rel, agree, n_pairs, detail = rb.second_judge_relevance(
            bench, judgments, ratings, text, judge, swap, rcfg.judge_share, cfg.seed,
            configured_prior(cfg),
        )  # fmt: skip
    else:
        detail = ""
    base_runs = rescore_runs(runs, rel, cfg.leaderboard.k) if runs.height else runs
    table = (
        rb.robustness_table(
            base_runs, rel, cfg.leaderboard.k, cfg.seed, judge_rel, detail, rcfg.half_splits
        )  # fmt: skip
        if runs.height
        else pl.DataFrame()
    )
    text_out = rb.read_robustness(table, agree, label) if table.height else "No runs yet."
    meta = {
        **stage_metadata(table.height),
        "table": markdown_table(table, max_rows=60) if table.height else "none",
        "reading": MetadataValue.md(text_out),
        "second_judge": label or "off",
        "judge_agreement": None if agree is None else round(agree, 4),
        "rejudged_pairs": n_pairs,
        "judge_share": rcfg.judge_share,
        "seed": cfg.seed,
    }
    if table.height:
        meta["plot"] = figure_markdown(robustness_figure(table), "robustness of the ordering")
    return Output(table, metadata=meta)
