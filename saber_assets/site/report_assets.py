"""benchmark_report: every analysis and the leaderboard in one self-contained HTML file."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping

import polars as pl
from dagster import AssetIn, AssetKey, MetadataValue, Output

from saber_assets.analyses.composition import composition, shares_figure
from saber_assets.benchmark.data import MANIFEST, Benchmark, verification_line
from saber_assets.candidates.coverage import COVERAGE_SCHEMA
from saber_assets.config import PipelineConfig
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.board import (
    CI_HIGH,
    CI_HIGH_CLEAN,
    CI_HIGH_JOINT,
    CI_LOW,
    CI_LOW_CLEAN,
    CI_LOW_JOINT,
    Board,
    board_domains,
    domain_mean,
    domain_queries,
    score_column,
)
from saber_assets.leaderboard.board_markdown import same_scores_note
from saber_assets.leaderboard.contamination_columns import checked_rows, contamination_paragraph
from saber_assets.leaderboard.joint import share_texts
from saber_assets.leaderboard.plots import pvalue_heatmap
from saber_assets.lib.declare import Declared, analysis
from saber_assets.lib.figures import png_base64
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.lib.sections import interval_text
from saber_assets.outputs import read_json_or_none, written_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.site import plots
from saber_assets.site import report as rp

# an analysis's section: (its table, the config) -> the report's section
SectionOf = Callable[[pl.DataFrame, PipelineConfig], rp.Section]


def report_path(pipeline: PipelineResource):
    return pipeline.outputs().report / "index.html"


def _by_domain(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
    frames = [parts[k].with_columns(pl.lit(k).alias("domain")) for k in sorted(parts)]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _board_table(board: pl.DataFrame) -> pl.DataFrame:
    domains = board_domains(board)
    metric = score_column(board)
    return board.select(
        "setting",
        "retriever",
        pl.col(metric).round(3),
        interval_text(CI_LOW, CI_HIGH).alias("95% CI"),
        *[
            pl.col(domain_mean(d)).round(3).alias(f"{d} (n={board[domain_queries(d)].max()})")
            if domain_queries(d) in board.columns
            else pl.col(domain_mean(d)).round(3)
            for d in domains
        ],
        *_joint_columns(board),
        *[c for c in ("rank_ci", "rank_ci_joint", "beats", "same_scores_as") if c in board.columns],
        # a decision at its Holm threshold, open: another seed could turn it
        *(
            ["undecided"]
            if "undecided" in board.columns and board["undecided"].is_not_null().any()
            else []
        ),  # fmt: skip
        *_clean_columns(board, metric),
    ).sort("setting", metric, descending=[False, True])


def _joint_columns(board: pl.DataFrame) -> list[pl.Expr]:
    """The interval over the queries and the judgments, and the judge's share of it, where the
    benchmark carried its judgments."""
    if CI_LOW_JOINT not in board.columns:
        return []
    corrected = (
        [pl.col("ndcg_corrected").round(3).alias("judge-corrected nDCG")]
        if "ndcg_corrected" in board.columns
        else []
    )
    return [
        *corrected,
        interval_text(CI_LOW_JOINT, CI_HIGH_JOINT).alias("95% CI, queries + judgments"),
        pl.lit(share_texts(board)).alias("judge share"),
    ]  # fmt: skip


def _clean_columns(board: pl.DataFrame, metric: str) -> list[pl.Expr]:
    """The contaminated share and the clean score with its CI, where any row has them."""
    clean = f"{metric}_clean"
    if checked_rows(board).is_empty():
        return []
    return [
        pl.col("contaminated_share").round(3).alias("contaminated"),
        pl.format(
            "{} [{}, {}]",
            pl.col(clean).round(3),
            pl.col(CI_LOW_CLEAN).round(3),
            pl.col(CI_HIGH_CLEAN).round(3),
        ).alias(f"{metric} clean [95% CI]"),
    ]


def benchmark_report(sections: Mapping[str, SectionOf]) -> Declared:
    """The report asset over the analyses that declare a section (``@analysis(section=...)``),
    in the order ``sections`` gives them: adding an analysis adds its section, here untouched."""

    @analysis(
        name="benchmark_report",
        deps=[
            AssetKey("leaderboard"),
            AssetKey("benchmark_export"),
            AssetKey("benchmark_verification"),
        ],  # its header: the verdict
        ins={name: AssetIn(name) for name in sections},
    )
    def report(
        pipeline: PipelineResource,
        corpus: pl.DataFrame,
        problem_annotations: pl.DataFrame,
        ontology_tree: pl.DataFrame,
        relevance_thresholds: pl.DataFrame,
        relevance_ratings: dict[str, pl.DataFrame],
        tournament_judgments: dict[str, pl.DataFrame],
        benchmark_composition: pl.DataFrame,
        **analyses: pl.DataFrame,
    ) -> Output[pl.DataFrame]:
        """One self-contained HTML file (inline figures, no network) under
        `<outputs>/report/index.html`: composition, thresholds, candidates, tournament
        statistics, the leaderboard with CIs and every analysis, each with a paragraph read off
        its numbers."""
        t0 = time.perf_counter()
        cfg = pipeline.load()
        bench = Benchmark.read(pipeline.outputs().benchmark)
        board = Board.read_table(pipeline.outputs().leaderboard)
        tests = Board.read_tests(pipeline.outputs().leaderboard)
        tests = tests if tests is not None else pl.DataFrame()
        own = built_sections(
            bench, board, tests, corpus, problem_annotations, ontology_tree,
            relevance_thresholds, concat_partitions(relevance_ratings),
            _by_domain(tournament_judgments), benchmark_composition,
        )  # fmt: skip
        # an analysis that was not asked for (its section None) leaves no section behind
        shown = (section(analyses[name], cfg) for name, section in sections.items())
        every = own + [s for s in shown if s is not None]
        return write_report(pipeline, cfg, bench, every, t0)

    return report


def built_sections(
    bench: Benchmark,
    board: pl.DataFrame,
    tests: pl.DataFrame,
    corpus: pl.DataFrame,
    problem_annotations: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    relevance_thresholds: pl.DataFrame,
    ratings: pl.DataFrame,
    judgments: pl.DataFrame,
    benchmark_composition: pl.DataFrame,
) -> list[rp.Section]:
    """The report's own sections, on what the build made: the corpus and composition, the
    thresholds and candidates, the tournament, the leaderboard."""
    tables = composition(
        bench.queries, bench.documents, problem_annotations, ontology_tree, ratings
    )
    stats = rp.tournament_stats(judgments)
    coverage = pl.DataFrame(bench.manifest.get("coverage") or [], schema=COVERAGE_SCHEMA)
    fig = lambda f, caption: [(caption, png_base64(f))]  # noqa: E731
    return [
        rp.Section(
            "Corpus and composition",
            rp.read_composition(corpus, tables),
            [("sources", tables["sources"]), ("domains and sub-domains", benchmark_composition)],
            fig(shares_figure(tables), "queries and documents by domain; sources"),
        ),
        rp.Section(
            "Thresholds and candidates",
            " ".join(
                x
                for x in (
                    rp.read_coverage(coverage),
                    rp.read_candidates(relevance_thresholds, tables["groups"]),
                )
                if x
            ),
            [
                ("each domain against its query quota, down the funnel", coverage),
                ("thresholds per domain", relevance_thresholds),
                ("candidate groups", tables["groups"]),
            ],
        ),
        rp.Section(
            "Tournament",
            rp.read_tournament(stats),
            [("judgments and position bias per domain", stats)],
        ),
        rp.Section(
            "Leaderboard",
            " ".join(
                x
                for x in (
                    rp.read_leaderboard(board, tests),
                    same_scores_note(board, markdown=False),
                    contamination_paragraph(board),
                )
                if x
            ),
            [
                (
                    "nDCG@10 with 95% bootstrap CIs, overall and per domain, the rank's 95% interval "
                    "and the systems each row is significantly better than",
                    _board_table(board),
                )
            ],
            fig(
                plots.leaderboard_figure(board),
                "nDCG@10 per retriever and setting (rank intervals)",
            )
            + [
                (f"Holm-corrected p-values, {s}", png_base64(pvalue_heatmap(tests, s)))
                for s in board["setting"].unique(maintain_order=True).to_list()
                if tests.height and tests.filter(pl.col("setting") == s).height
            ],
        ),
    ]


def write_report(
    pipeline: PipelineResource, cfg, bench: Benchmark, sections: list[rp.Section], t0: float
) -> Output[pl.DataFrame]:
    """The page written (a reader never sees half of it) and one reading per section."""
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = rp.render_html(
        f"SABER benchmark report: {cfg.name}",
        f"seed {cfg.seed} · {bench.queries.height} queries · {bench.documents.height} documents "
        f"· generated {when}",
        sections,
        # the verdict on the scored benchmark, whose manifest the verification wrote
        verification_line(
            read_json_or_none(pipeline.outputs().evaluation_benchmark / MANIFEST) or {}
        ),
    )
    path = report_path(pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_whole(path) as tmp:  # a reader never sees half a report
        tmp.write_text(page, encoding="utf-8")
    readings = pl.DataFrame(
        {"section": [s.title for s in sections], "reading": [s.reading for s in sections]}
    )
    return Output(
        readings,
        metadata={
            **stage_metadata(readings.height, seconds=time.perf_counter() - t0),
            "report": MetadataValue.path(str(path)),
            "open": MetadataValue.url(path.resolve().as_uri()),
            "size_kb": round(len(page.encode()) / 1024, 1),
            "readings": markdown_table(readings, max_chars=400),
        },
    )
