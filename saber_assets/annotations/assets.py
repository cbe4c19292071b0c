"""annotations stage: per problem, ontology topics and a core-idea summary; then IC and domains."""

import time

import numpy as np
import polars as pl
from dagster import (
    AssetExecutionContext,
    AssetIn,
    MetadataValue,
    Output,
)

from saber_assets.annotations.traversal import traverse
from saber_assets.io_managers import concat_partitions
from saber_assets.lib.declare import table_asset
from saber_assets.lib.metadata import llm_metadata, markdown_table, stage_metadata
from saber_assets.lib.partitions import chunk_of
from saber_assets.lib.pod_sizes import llm_pod
from saber_assets.lib.tasks import tasks_for
from saber_assets.ontology.domains import domain_names
from saber_assets.ontology.similarity import (
    annotation_counts,
    information_content,
    subtree_counts,
)
from saber_assets.ontology.tree import TopicTree
from saber_assets.pipeline import PipelineResource
from saber_resources.llm import LLMResource
from saber_resources.llm_tasks import Outcome
from saber_resources.stores import StoresResource
from saber_resources.titles import humanize_title

TOPIC_SCHEMA = {
    "id": pl.String,
    "topics": pl.List(pl.Int32),
    "topic_paths": pl.List(pl.String),
    "status": pl.String,
    "calls": pl.Int32,
    # branches whose request failed (answers never parsed): pruned there, the rest annotated
    "pruned": pl.Int32,
    "error": pl.String,
    "raw_answer": pl.String,
    "backend": pl.String,
    "model": pl.String,
    "prompt_version": pl.String,
    "tau": pl.Float64,
}
SUMMARY_SCHEMA = {
    "id": pl.String,
    "summary": pl.String,  # the core idea: what the summary signal reads
    # the rest of an LLM's answer (the paper's fields); null where the backend gives none
    "has_core_idea": pl.Boolean,
    "supporting_ideas": pl.List(pl.String),
    "keywords": pl.List(pl.String),
    "confidence": pl.Float64,
    # what the prompt asks beyond the hard rules and the idea does not do (kept, as the
    # reference keeps it): formula, more than one sentence, not imperative
    "style_flags": pl.List(pl.String),
    "status": pl.String,
    "error": pl.String,
    "raw_answer": pl.String,
    "backend": pl.String,
    "model": pl.String,
    "prompt_version": pl.String,
}


def detail(outcome: Outcome, field: str):
    """One field of a summary answer beyond the core idea (None for a backend without them)."""
    return outcome.detail.get(field) if outcome.ok and outcome.detail else None


def _chunk_rows(corpus: pl.DataFrame, context: AssetExecutionContext) -> pl.DataFrame:
    """The corpus rows of this run's annotation chunk."""
    key = context.partition_key
    n = len(context.assets_def.partitions_def.get_partition_keys())
    return corpus.filter(
        pl.col("id").map_elements(lambda i: chunk_of(i, n), return_dtype=pl.String) == key
    )


def _chunk_work(
    context: AssetExecutionContext,
    corpus: pl.DataFrame,
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
):
    """An annotation chunk's config, rows and the tasks (scorer, summarizer) that annotate them."""
    cfg = pipeline.load().annotations
    tasks = tasks_for(
        llm,
        stores,
        cfg.max_parse_retries,
        summary_word_cap=cfg.core_idea_word_cap,
        answer_format=cfg.answer_format,
    )
    return cfg, _chunk_rows(corpus, context), tasks


def _histogram(values: list[int], label: str) -> MetadataValue:
    counts = pl.DataFrame({label: values}).group_by(label).len("problems").sort(label)
    return markdown_table(counts)


def _call_metadata(stats, elapsed: float, n: int) -> dict:
    return {
        "calls_made": stats.calls,
        "served_from_cache": stats.cached,
        "parse_failures_retried": stats.parse_failures,
        "seconds_per_1000_problems": round(1000 * elapsed / max(n, 1), 1),
    }


@table_asset(
    reads=("llm", "annotations", "prompts"),
    pod=llm_pod,
    pool="llm",
    ins={"corpus": AssetIn(), "ontology_tree": AssetIn()},
)
def topic_annotations(
    context: AssetExecutionContext,
    corpus: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
) -> Output[pl.DataFrame]:
    """Ontology topics per problem by top-down traversal (τ from config), most specific kept."""
    cfg, rows, tasks = _chunk_work(context, corpus, pipeline, llm, stores)
    tree = TopicTree.from_frame(ontology_tree)
    scorer = tasks.topic_scorer
    labels = [humanize_title(t) for t in tree.titles]
    texts = [scorer.text_for(p, s) for p, s in zip(rows["problem"], rows["solution"], strict=True)]
    t0 = time.perf_counter()
    results, levels = traverse(
        texts, tree.children(), labels, scorer, cfg.tau, rescale=cfg.rescale_scores
    )
    elapsed = time.perf_counter() - t0
    df = pl.DataFrame(
        {
            "id": rows["id"],
            "topics": [r.topics for r in results],
            "topic_paths": [[tree.paths[t] for t in r.topics] for r in results],
            "status": [
                "failed" if r.failed else "ok" if r.topics else "no_topics" for r in results
            ],
            "calls": [r.calls for r in results],
            "pruned": [len(r.pruned) for r in results],
            "error": [r.error for r in results],
            "raw_answer": [r.raw for r in results],
            "backend": scorer.backend,
            "model": scorer.model,
            "prompt_version": scorer.version,
            "tau": cfg.tau,
        },
        schema=TOPIC_SCHEMA,
    )
    failed = int((df["status"] == "failed").sum())
    if failed:
        context.log.warning(
            f"{failed} problems got no topics: the scorer's answers never parsed (see error/raw_answer)"
        )
    pruned = int(df["pruned"].sum())
    if pruned:
        context.log.warning(
            f"{pruned} branches pruned in {int((df['pruned'] > 0).sum())} problems: their "
            "requests never parsed (the rest of each problem's topics kept; see error/raw_answer)"
        )
    return Output(
        df,
        metadata={
            **stage_metadata(df.height, seconds=elapsed, by=scorer),
            "tau": cfg.tau,
            "rescale_scores": cfg.rescale_scores,
            "failed": failed,
            "pruned_branches": pruned,
            "no_topics": int((df["status"] == "no_topics").sum()),
            "scorer_requests": int(df["calls"].sum()),
            "requests_per_problem": round(float(df["calls"].mean() or 0), 2),
            "topics_per_problem": _histogram(df["topics"].list.len().to_list(), "topics"),
            "levels": markdown_table(pl.DataFrame(levels)) if levels else "none",
            **_call_metadata(tasks.topic_scorer.stats, elapsed, df.height),
            **llm_metadata({"topics": scorer}),
        },
    )


@table_asset(reads=("llm", "annotations", "prompts"), pod=llm_pod, pool="llm")
def solution_summaries(
    context: AssetExecutionContext,
    corpus: pl.DataFrame,
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
) -> Output[pl.DataFrame]:
    """One imperative ≤30-word sentence naming the solution's core idea, or null when there is none."""
    cfg, rows, tasks = _chunk_work(context, corpus, pipeline, llm, stores)
    summarizer = tasks.summarizer
    t0 = time.perf_counter()
    outcomes = summarizer.summarize_batch(list(zip(rows["problem"], rows["solution"], strict=True)))
    elapsed = time.perf_counter() - t0
    df = pl.DataFrame(
        {
            "id": rows["id"],
            "summary": [o.value for o in outcomes],
            "has_core_idea": [detail(o, "has_core_idea") for o in outcomes],
            "supporting_ideas": [detail(o, "supporting_ideas") for o in outcomes],
            "keywords": [detail(o, "keywords") for o in outcomes],
            "confidence": [detail(o, "confidence") for o in outcomes],
            "style_flags": [detail(o, "style_flags") for o in outcomes],
            "status": ["failed" if not o.ok else "ok" if o.value else "none" for o in outcomes],
            "error": [o.error for o in outcomes],
            "raw_answer": [o.raw for o in outcomes],
            "backend": summarizer.backend,
            "model": summarizer.model,
            "prompt_version": summarizer.version,
        },
        schema=SUMMARY_SCHEMA,
    )
    status = df.group_by("status").len().sort("status")
    return Output(
        df,
        metadata={
            **stage_metadata(df.height, seconds=elapsed, by=summarizer),
            "status": markdown_table(status),
            "failed": int((df["status"] == "failed").sum()),
            # kept, flagged: what the prompt asks beyond the 30-word cap and the idea does not do
            "style_flagged": int((df["style_flags"].list.len() > 0).sum()),
            "examples": markdown_table(
                df.filter(pl.col("status") == "ok").select("id", "summary").head(8)
            ),
            **_call_metadata(summarizer.stats, elapsed, df.height),
            **llm_metadata({"summaries": summarizer}),
        },
    )


@table_asset(reads=("signals.freeze_ic", "signals.ic_counts"))
def topic_information_content(
    pipeline: PipelineResource,
    topic_annotations: dict[str, pl.DataFrame],
    ontology_tree: pl.DataFrame,
) -> Output[pl.DataFrame]:
    """IC per tree node: c(t) = annotations of t or a descendant, p = c / c(root), IC = -ln p;
    an annotation is a most specific topic, or every accepted node (``signals.ic_counts``)."""
    how = pipeline.load().signals.ic_counts
    ann = concat_partitions(topic_annotations)
    tree = TopicTree.from_frame(ontology_tree)
    counts = annotation_counts(ann["topics"].to_list(), tree.parent, how)
    ic = information_content(tree.parent, counts) if counts.sum() else np.full(tree.n_nodes, np.inf)
    df = pl.DataFrame(
        {
            "node": np.arange(tree.n_nodes, dtype=np.int32),
            "count": counts,
            "subtree_count": subtree_counts(tree.parent, counts),
            "ic": ic,
        }
    )
    used = df.filter(pl.col("count") > 0)
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "annotations": int(counts.sum()),
            "counting": how,
            "nodes_annotated": used.height,
            "nodes_with_finite_ic": int(np.isfinite(ic).sum()),
            "most_used": markdown_table(
                used.sort("count", descending=True)
                .head(10)
                .join(ontology_tree.select("node", "path"), on="node")
            ),
        },
    )


@table_asset(reads=())
def problem_annotations(
    pipeline: PipelineResource,
    corpus: pl.DataFrame,
    topic_annotations: dict[str, pl.DataFrame],
    solution_summaries: dict[str, pl.DataFrame],
    ontology_tree: pl.DataFrame,
) -> Output[pl.DataFrame]:
    """One row per corpus problem, in corpus order: topics, domains (from the topics), summary."""
    topics = concat_partitions(topic_annotations).select(
        "id", "topics", pl.col("status").alias("topic_status")
    )
    summaries = concat_partitions(solution_summaries).select(
        "id", "summary", pl.col("status").alias("summary_status")
    )
    domain_of = ontology_tree["domain"].to_list()
    df = (
        corpus.select("id")
        .with_row_index("row")
        .join(topics, on="id", how="left")
        .join(summaries, on="id", how="left")
        .sort("row")
    )
    missing = df.filter(pl.col("topic_status").is_null() | pl.col("summary_status").is_null())
    if missing.height:
        raise ValueError(
            f"{missing.height} corpus problems have no annotation row (first: {missing['id'][0]}): materialise every annotation chunk"
        )
    order = domain_names(pipeline.load().ontology)
    domains = [
        [d for d in order if d in {domain_of[t] for t in ts}] for ts in df["topics"].to_list()
    ]
    df = df.with_columns(pl.Series("domains", domains, dtype=pl.List(pl.String)))
    mix = (
        df.select(pl.col("domains").explode())
        .group_by("domains")
        .len("problems")
        .sort("problems", descending=True)
    )
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "domain_mix": markdown_table(mix),
            "without_topics": int((df["topics"].list.len() == 0).sum()),
            "without_summary": int(df["summary"].is_null().sum()),
        },
    )
