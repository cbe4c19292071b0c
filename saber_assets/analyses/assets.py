"""Analyses of the built benchmark (group `analyses`): each a thin asset over a pure module."""

from __future__ import annotations

import matplotlib
import polars as pl
from dagster import AssetKey, MetadataValue, Output, asset

from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource

from ..leaderboard.exchange import Benchmark
from ..ops.io import concat_partitions
from ..ops.metadata import figure_markdown, markdown_table
from ..ops.tasks import tasks_for
from ..resources import SaberSettings
from .composition import composition
from .human_agreement import COLUMNS as HUMAN_COLUMNS
from .human_agreement import human_agreement, read_annotations
from .mteb import mteb_correlation as mteb_correlation_table
from .mteb import read_scores
from .signal_groups import GROUPS, area_under, group_curves

matplotlib.use("Agg")
SCORE_SCHEMA = {"model": pl.String, "score": pl.Float64}


def _curves_plot(curves: pl.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for group in GROUPS:
        line = curves.filter((pl.col("scope") == "all") & (pl.col("group") == group))
        ax.plot(line["r"], line["fraction"], label=group.replace("_", " "))
    ax.set_xlabel("rank r of the final ratings")
    ax.set_ylabel("fraction of the group within the top r")
    ax.set_title("signal groups, all queries")
    ax.legend()
    return figure_markdown(fig, "signal group curves")


@asset(group_name="analyses", io_manager_key="parquet_io", kinds={"polars", "parquet"})
def signal_group_curves(relevance_ratings: dict[str, pl.DataFrame]) -> Output[pl.DataFrame]:
    """Cumulative fraction of each candidate group (topic-only, summary-only, both) within the
    top r of the final ratings, over all queries and per domain."""
    curves = group_curves(concat_partitions(relevance_ratings))
    return Output(
        curves,
        metadata={
            "dagster/row_count": curves.height,
            "area_under_curve": markdown_table(area_under(curves)),
            "plot": _curves_plot(curves),
        },
    )


def _shares_plot(tables: dict[str, pl.DataFrame]):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, what in zip(axes[:2], ("queries", "documents"), strict=True):
        frame = (
            tables["domains"]
            .filter(pl.col("of") == what)
            .group_by("level1")
            .agg(pl.col("count").sum())
            .sort("count", descending=True)
        )
        ax.pie(frame["count"], labels=frame["level1"], autopct="%1.0f%%", textprops={"size": 7})
        ax.set_title(f"{what} by domain (topic assignments)")
    src = tables["sources"]
    for k, what in enumerate(("queries", "documents")):
        part = src.filter(pl.col("of") == what)
        axes[2].bar([f"{s}\n{what}" for s in part["source"]], part["share"], color=f"C{k}")
    axes[2].set_ylabel("share")
    axes[2].set_title("sources")
    axes[2].tick_params(axis="x", labelsize=7)
    return figure_markdown(fig, "benchmark composition")


@asset(
    group_name="analyses",
    io_manager_key="parquet_io",
    kinds={"polars", "parquet"},
    deps=[AssetKey("benchmark_export")],
)
def benchmark_composition(
    settings: SaberSettings,
    problem_annotations: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """Domain and sub-domain shares of the queries and the documents (first and second tree
    levels), source shares, and the candidate groups' sizes."""
    bench = Benchmark.read(settings.output_dir() / "benchmark")
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
            "dagster/row_count": domains.height,
            "queries_by_subdomain": markdown_table(domains.filter(pl.col("of") == "queries")),
            "documents_by_subdomain": markdown_table(domains.filter(pl.col("of") == "documents")),
            "sources": markdown_table(tables["sources"]),
            "candidate_groups": markdown_table(tables["groups"]),
            "plot": _shares_plot(tables),
            "queries": bench.queries.height,
            "documents": bench.documents.height,
            "note": MetadataValue.text(
                "a problem counts once in every sub-domain it is annotated with"
            ),
        },
    )


def _scatter(matched: pl.DataFrame):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, ((setting,), part) in enumerate(matched.group_by("setting", maintain_order=True)):
        ax.scatter(part["mteb"], part["ndcg@10"], label=setting, color=f"C{k}")
        for m, x, y in part.select("model", "mteb", "ndcg@10").iter_rows():
            ax.annotate(m, (x, y), fontsize=6)
    ax.set_xlabel("MTEB retrieval score")
    ax.set_ylabel("nDCG@10 on this benchmark")
    ax.legend(fontsize=7)
    return figure_markdown(fig, "MTEB vs benchmark")


@asset(
    group_name="analyses",
    io_manager_key="parquet_io",
    kinds={"polars", "parquet"},
    deps=[AssetKey("leaderboard")],
)
def mteb_correlation(settings: SaberSettings) -> Output[pl.DataFrame]:
    """Pearson and Spearman (with 95% CIs) between the leaderboard's nDCG@10 and the MTEB
    retrieval scores of `analyses.mteb_scores`, per setting, for all matched models and for
    `analyses.recent_models`. Without a scores file: empty, with a note saying so."""
    acfg = settings.load().analyses
    board = pl.read_csv(settings.output_dir() / "leaderboard" / "leaderboard.csv")
    if acfg.mteb_scores is None:
        _, empty = mteb_correlation_table(board.head(0), pl.DataFrame(schema=SCORE_SCHEMA))
        note = "no analyses.mteb_scores file configured: nothing to correlate"
        return Output(empty, metadata={"dagster/row_count": 0, "note": note})
    matched, table = mteb_correlation_table(
        board, read_scores(acfg.mteb_scores), acfg.model_names, acfg.recent_models
    )
    unmatched = sorted(set(board["retriever"]) - set(matched["retriever"]))
    meta = {
        "dagster/row_count": table.height,
        "correlations": markdown_table(table),
        "matched_models": matched["model"].n_unique(),
        "unmatched_retrievers": ", ".join(unmatched) or "none",
    }
    if matched.height:
        meta["plot"] = _scatter(matched)
    return Output(table, metadata=meta)


def judge_choices(judge, text: dict[str, str], queries: dict[str, str], pairs) -> dict:
    """The pairwise judge on each (query, a, b), asked in both orders: the same answer both
    times is its choice, different answers a tie, a failure no answer."""
    pairs = [p for p in pairs if p[0] in queries and p[1] in text and p[2] in text]
    items = [(queries[q], text[a], text[b]) for q, a, b in pairs]
    items += [(queries[q], text[b], text[a]) for q, a, b in pairs]
    out = judge.compare_batch(items)
    choices = {}
    for k, pair in enumerate(pairs):
        ab, ba = out[k], out[k + len(pairs)]
        if not (ab.ok and ba.ok):
            continue
        first = "a" if ab.value == 1 else "b"
        second = "b" if ba.value == 1 else "a"
        choices[pair] = first if first == second else "tie"
    return choices


@asset(group_name="analyses", io_manager_key="parquet_io", kinds={"polars", "parquet"}, pool="llm")
def judge_human_agreement(
    settings: SaberSettings,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """Agreement of the pairwise judge and of the Bradley–Terry ranking with human pairwise
    annotations (`analyses.human_annotations`), overall and by rank distance, and between
    annotators. Without an annotation file: empty, with a note saying so."""
    cfg = settings.load()
    ratings = concat_partitions(relevance_ratings)
    if cfg.analyses.human_annotations is None:
        empty = human_agreement(
            pl.DataFrame(schema=dict.fromkeys(HUMAN_COLUMNS, pl.String)), {}, ratings
        )[1]
        note = "no analyses.human_annotations file configured: nothing to compare with"
        return Output(empty.head(0), metadata={"dagster/row_count": 0, "note": note})
    humans = read_annotations(cfg.analyses.human_annotations)
    tcfg = cfg.tournament
    judge = tasks_for(
        llm, stores, tcfg.max_parse_retries, tcfg.judge_prompt, tcfg.judge_max_tokens
    ).pair_judge
    text = {
        r[0]: judge.text_for(r[1], r[2])
        for r in corpus.select("id", "problem", "solution").iter_rows()
    }
    pairs = sorted(set(humans.select("query", "a", "b").iter_rows()))
    choices = judge_choices(judge, text, text, pairs)
    scored, summary = human_agreement(humans, {"pairwise_judge": choices}, ratings)
    return Output(
        summary,
        metadata={
            "dagster/row_count": summary.height,
            "agreement": markdown_table(summary),
            "annotations": humans.height,
            "annotators": humans["annotator"].n_unique(),
            "pairs_judged": len(choices),
            "judge": f"{judge.backend}:{judge.model} ({judge.version})",
        },
    )
