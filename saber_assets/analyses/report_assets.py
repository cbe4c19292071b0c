"""benchmark_report: every analysis and the leaderboard in one self-contained HTML file."""

from __future__ import annotations

import datetime as dt
import time

import polars as pl
from dagster import AssetKey, MetadataValue, Output

from saber_assets.analyses import plots
from saber_assets.analyses import report as rp
from saber_assets.analyses.composition import composition
from saber_assets.analyses.signal_groups import area_under
from saber_assets.benchmark.data import Benchmark
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.contamination_columns import checked_rows, contamination_paragraph
from saber_assets.leaderboard.metrics import score_column
from saber_assets.leaderboard.plots import pvalue_heatmap
from saber_assets.lib.declare import analysis
from saber_assets.lib.figures import png_base64
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.resources import PipelineResource


def report_path(pipeline: PipelineResource):
    return pipeline.outputs().report / "index.html"


def _by_domain(parts: dict[str, pl.DataFrame]) -> pl.DataFrame:
    frames = [parts[k].with_columns(pl.lit(k).alias("domain")) for k in sorted(parts)]
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def _board_table(board: pl.DataFrame) -> pl.DataFrame:
    domains = [c[:-3] for c in board.columns if c.endswith(" ci") and c[:-3] in board.columns]
    metric = score_column(board)
    return board.select(
        "setting",
        "retriever",
        pl.col(metric).round(3),
        pl.format("[{}, {}]", pl.col("ci_low").round(3), pl.col("ci_high").round(3)).alias(
            "95% CI"
        ),
        *[pl.col(d).round(3) for d in domains],
        *[c for c in ("rank_ci", "beats") if c in board.columns],
        *_clean_columns(board, metric),
    ).sort("setting", metric, descending=[False, True])


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
            pl.col("ci_low_clean").round(3),
            pl.col("ci_high_clean").round(3),
        ).alias(f"{metric} clean [95% CI]"),
    ]


@analysis(deps=[AssetKey("leaderboard"), AssetKey("benchmark_export")])
def benchmark_report(
    pipeline: PipelineResource,
    corpus: pl.DataFrame,
    problem_annotations: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    relevance_thresholds: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
    tournament_judgments: dict[str, pl.DataFrame],
    benchmark_composition: pl.DataFrame,
    signal_group_curves: pl.DataFrame,
    tournament_convergence: pl.DataFrame,
    judging_regimes: pl.DataFrame,
    judge_human_agreement: pl.DataFrame,
    mteb_correlation: pl.DataFrame,
    math_vs_words: pl.DataFrame,
    leaderboard_robustness: pl.DataFrame,
) -> Output[pl.DataFrame]:
    """One self-contained HTML file (inline figures, no network) under
    `<outputs>/report/index.html`: composition, thresholds, candidates, tournament statistics,
    the leaderboard with CIs and every analysis, each with a paragraph read off its numbers."""
    t0 = time.perf_counter()
    cfg = pipeline.load()
    ratings = concat_partitions(relevance_ratings)
    bench = Benchmark.read(pipeline.outputs().benchmark)
    tables = composition(
        bench.queries, bench.documents, problem_annotations, ontology_tree, ratings
    )
    judgments = _by_domain(tournament_judgments)
    stats = rp.tournament_stats(judgments)
    board = pl.read_csv(pipeline.outputs().leaderboard / "leaderboard.csv")
    sig_path = pipeline.outputs().leaderboard / "significance.parquet"
    tests = pl.read_parquet(sig_path) if sig_path.exists() else pl.DataFrame()
    areas = area_under(signal_group_curves)
    mean_conv = tournament_convergence.group_by("policy", "round").agg(
        pl.col("calls", "inversions", "share").mean()
    )
    fig = lambda f, caption: [(caption, png_base64(f))]  # noqa: E731
    sections = [
        rp.Section(
            "Corpus and composition",
            rp.read_composition(corpus, tables),
            [("sources", tables["sources"]), ("domains and sub-domains", benchmark_composition)],
            fig(plots.shares_figure(tables), "queries and documents by domain; sources"),
        ),
        rp.Section(
            "Thresholds and candidates",
            rp.read_candidates(relevance_thresholds, tables["groups"]),
            [
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
                x for x in (rp.read_leaderboard(board, tests), contamination_paragraph(board)) if x
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
        rp.Section(
            "Robustness of the ordering",
            rp.read_robustness_section(leaderboard_robustness),
            [
                (
                    "Kendall τ to the leaderboard's ordering, per setting and check",
                    leaderboard_robustness,
                )
            ],
            fig(plots.robustness_figure(leaderboard_robustness), "τ per check")
            if leaderboard_robustness.height
            else [],
        ),
        rp.Section(
            "Signal-group curves",
            rp.read_signal_groups(areas),
            [("mean of each curve, per scope", areas)],
            fig(plots.curves_figure(signal_group_curves), "cumulative share of each group"),
        ),
        rp.Section(
            "Tournament convergence",
            rp.read_convergence(tournament_convergence, cfg.tournament.rounds),
            [("mean over the queries, per policy and round", mean_conv.sort("policy", "round"))],
            fig(plots.convergence_figure(mean_conv), "inversions vs judge calls")
            if mean_conv.height
            else [],
        ),
        rp.Section(
            "Judging regimes",
            rp.read_regimes(judging_regimes),
            [("agreement with the BT ranking by rank distance", judging_regimes)],
            fig(plots.regimes_figure(judging_regimes), "agreement by Δr")
            if judging_regimes.height
            else [],
        ),
        rp.Section(
            "Agreement with people",
            rp.read_human(judge_human_agreement),
            [("agreement by rank distance", judge_human_agreement)],
        ),
        rp.Section(
            "MTEB correlation",
            rp.read_mteb(mteb_correlation),
            [("correlations with 95% CIs", mteb_correlation)],
        ),
        rp.Section(
            "Math vs words",
            rp.read_math_vs_words(math_vs_words),
            [("math-only wins per retriever, setting and domain", math_vs_words)],
            fig(plots.wins_figure(math_vs_words), "math-only wins (%)")
            if math_vs_words.height
            else [],
        ),
    ]
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = rp.render_html(
        f"SABER benchmark report: {cfg.name}",
        f"seed {cfg.seed} · {bench.queries.height} queries · {bench.documents.height} documents "
        f"· generated {when}",
        sections,
    )
    path = report_path(pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a report
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
