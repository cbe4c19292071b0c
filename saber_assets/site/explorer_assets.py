"""The explorer (group `analyses`): the static site over the build, a thin asset over
``explorer.py``."""

from __future__ import annotations

import polars as pl
from dagster import AssetKey, MetadataValue, Output

from saber_assets.benchmark.data import Benchmark
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.board import Board
from saber_assets.lib.declare import analysis
from saber_assets.lib.metadata import (
    stage_metadata,
)
from saber_assets.pipeline import PipelineResource
from saber_assets.runs.files import stored_runs
from saber_assets.site.build_diff import (
    BuildState,
    diff_builds,
    diff_data,
    diff_lines,
    remember,
)
from saber_assets.site.explorer import ExplorerInputs, site_links, write_site


@analysis(
    reads=(),  # no setting: what it shows comes in with its inputs
    deps=[AssetKey("leaderboard"), AssetKey("evaluation_benchmark"),
          AssetKey("benchmark_verification")],  # its header: the verdict
)  # fmt: skip
def benchmark_explorer(
    pipeline: PipelineResource,
    problem_annotations: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
    tournament_judgments: dict[str, pl.DataFrame],
    full_corpus_fill: pl.DataFrame,
) -> Output[pl.DataFrame]:
    """The explorer (`<outputs>/explorer/index.html`, opens from file://): the leaderboard with
    its tie groups, a page per query with its candidates, grades and judgments, and any two
    systems compared query by query (``explorer.py``)."""
    out = pipeline.outputs()
    bench = Benchmark.read(out.evaluation_benchmark)
    path_of = dict(ontology_tree.select("node", "path").iter_rows())
    annotations = problem_annotations.with_columns(
        pl.col("topics")
        .map_elements(lambda ts: [path_of.get(t, "") for t in ts], return_dtype=pl.List(pl.String))
        .alias("topic_paths")
    )
    board = Board.read_table(out.leaderboard)
    runs = stored_runs(out.runs, board["retriever"].unique().sort().to_list())
    runs = runs.select(  # a run written before the full-corpus top was kept has none
        c
        for c in ("retriever", "query_id", "setting", "ndcg", "scores", "full_top")
        if c in runs.columns
    )
    tests = Board.read_tests(out.leaderboard)
    ratings = concat_partitions(relevance_ratings)
    current = BuildState.of("this build", bench, board, ratings)
    previous, fingerprint = remember(out.builds, current)
    current.label = f"this build ({fingerprint})"
    diff = diff_builds(previous, current) if previous is not None else None
    inputs = ExplorerInputs(
        bench=bench,
        board=board,
        tests=tests if tests is not None else pl.DataFrame(),
        runs=runs,
        ratings=ratings,
        judgments=concat_partitions(tournament_judgments),
        annotations=annotations,
        downloads=site_links(),
        diff=diff_data(diff) if diff is not None else None,
        fill=full_corpus_fill,
    )
    written = write_site(out.explorer, inputs)
    index = out.explorer / "index.html"
    table = pl.DataFrame([written])
    return Output(
        table,
        metadata={
            **stage_metadata(table.height),
            "open": MetadataValue.url(index.resolve().as_uri()),
            "path": MetadataValue.path(str(index)),
            "query_pages": written["query_pages"],
            "size_mb": round(written["bytes"] / 2**20, 2),
            "build": fingerprint,
            "changed_since": MetadataValue.md(
                "\n".join(f"- {line}" for line in diff_lines(diff)) if diff else "no earlier build"
            ),
        },
    )
