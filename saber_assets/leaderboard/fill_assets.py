"""The full-corpus track's holes filled by the judge (``holes.py``): an asset of its own, so a
new retriever's run costs the judge only the documents it alone brought into the pool."""

import json
import time
import zlib

import polars as pl
from dagster import AssetExecutionContext, MetadataValue, Output

from saber_assets.contamination.matches import own_matched_queries
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.board import FILL_BOARD, FILL_SETTINGS, FILL_TABLE
from saber_assets.leaderboard.holes import (
    FILL_SCHEMA,
    fill_board,
    fill_holes,
    pooled_holes,
)
from saber_assets.lib.declare import table_asset
from saber_assets.lib.metadata import llm_metadata, markdown_table, stage_metadata
from saber_assets.lib.pod_sizes import llm_pod
from saber_assets.lib.tasks import prepared_judge
from saber_assets.outputs import write_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.ratings.rate import configured_prior
from saber_assets.runs.files import stored_runs
from saber_assets.tournament.engine import document_numbers
from saber_resources.llm import LLMResource
from saber_resources.progress import progress
from saber_resources.stores import StoresResource

GAME_CHUNK = 4096  # the fill's games judged a batch at a time, its progress advanced after each


@table_asset(
    reads=(
        "seed",
        "leaderboard.k",
        "leaderboard.fill_games",
        "leaderboard.bootstrap_resamples",
        "tournament",
        "ratings",
        "llm",
        "prompts",
        "contamination.exclude_own_matches",
    ),  # fmt: skip
    pod=llm_pod,
    pool="llm",
    deps=["retriever_runs", "own_candidate_matches"],
)
def full_corpus_fill(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """Each document in some system's full-corpus top k that no tournament graded, placed on its
    query's Bradley–Terry scale by `leaderboard.fill_games` games against rated candidates spread
    over it (the tournament's judge, prompt and presentation), with who pooled it and the games;
    a game played before is not asked again. The queries the board leaves out
    (`contamination.exclude_own_matches`) are left out here too. Writes the full-corpus board
    before and after the fill (`leaderboard/full_corpus_board.parquet`)."""
    cfg = pipeline.load()
    k, games = cfg.leaderboard.k, cfg.leaderboard.fill_games
    runs = stored_runs(pipeline.outputs().runs)
    if "full_top" not in runs.columns:  # no run yet, or runs written before the top was kept
        runs = pl.DataFrame(schema={"retriever": pl.String, "setting": pl.String,
                                    "query_id": pl.String, "full_top": pl.List(pl.String)})  # fmt: skip
    runs = runs.filter(pl.col("full_top").is_not_null())
    if cfg.contamination.exclude_own_matches:  # left out of every score, as on the board
        excluded = own_matched_queries(pipeline.outputs().contamination)
        runs = runs.filter(~pl.col("query_id").is_in(sorted(excluded)))
    ratings = concat_partitions(relevance_ratings).unique(["query_id", "candidate_id"])
    base: dict[str, dict[str, float]] = {}
    for q, c, r in ratings.select("query_id", "candidate_id", "rating").iter_rows():
        base.setdefault(q, {})[c] = r
    t0 = time.perf_counter()  # pooling, the games, the placements and the board
    holes = pooled_holes(runs, {q: set(g) for q, g in base.items()}, k)
    # the games played before: the fill as published beside the board (a new retriever's
    # fill asks only its own holes' games)
    path = pipeline.outputs().leaderboard / FILL_TABLE
    known = pl.read_parquet(path) if path.exists() else None
    stats = {"games_asked": 0, "judge_s": 0.0}
    judge = None
    if games and holes.height:
        t_judge = time.perf_counter()  # the judge's setup (its model, every text) is its time
        judge, text = prepared_judge(pipeline, llm, stores, corpus)
        number, _ = document_numbers(corpus)
        stats["judge_s"] += time.perf_counter() - t_judge

        def play(asked: list[tuple[str, str, str]]) -> list[float | None]:
            stats["games_asked"] += len(asked)
            items, hole_first = [], []
            for q, d, o in asked:
                if cfg.tournament.presentation == "by_id":
                    first = number[d] < number[o]
                else:  # seeded per game: the same game shows the same order in any rerun
                    first = hole_shown_first(cfg.seed, q, d, o)
                hole_first.append(first)
                items.append((text[q], *((text[d], text[o]) if first else (text[o], text[d]))))
            t_judge = time.perf_counter()
            out = []
            with progress("full-corpus fill", len(items), "game") as shown:
                for start in range(0, len(items), GAME_CHUNK):  # a long fill says where it is
                    out += judge.compare_batch(items[start : start + GAME_CHUNK])
                    shown.advance(min(GAME_CHUNK, len(items) - start))
            stats["judge_s"] += time.perf_counter() - t_judge
            return [
                None if not o.ok else float((o.value == 1) == first)
                for o, first in zip(out, hole_first, strict=True)
            ]

        fills = fill_holes(holes, ratings, play, games, configured_prior(cfg), known)
    else:
        fills = pl.DataFrame(schema=FILL_SCHEMA)
    board, taus = (
        fill_board(runs, base, fills, k, cfg.leaderboard.bootstrap_resamples, cfg.seed)
        if runs.height
        else (pl.DataFrame(), {})
    )
    seconds = time.perf_counter() - t0
    board_dir = pipeline.outputs().leaderboard
    board_dir.mkdir(parents=True, exist_ok=True)
    # beside the board, what `saber verify` re-derives it from: the holes with their games, and
    # the settings it was made with (the grades' own prior places the holes)
    write_whole(board_dir / FILL_TABLE, fills)
    write_whole(board_dir / FILL_SETTINGS, json.dumps(fill_settings(cfg), indent=2))
    write_whole(board_dir / FILL_BOARD, board)
    context.log.info(f"full-corpus fill: {holes.height} holes, {stats['games_asked']} games asked")
    return Output(
        fills,
        metadata={
            **stage_metadata(fills.height, seconds=seconds),
            "holes": holes.height,
            "games_per_hole": games,
            "games_asked": stats["games_asked"],
            # the judge's time apart from the fill's own work (pooling, placement fits, board)
            "judge_seconds": round(stats["judge_s"], 2),
            "fill_seconds_without_judge": round(seconds - stats["judge_s"], 2),
            "holes_placed_before": fills.height - placed_now(fills, known),
            "ordering_tau_before_after": json.dumps(taus),
            "board": markdown_table(board, max_rows=60)
            if board.height
            else MetadataValue.text("no full-corpus runs"),
            **(llm_metadata({"judge": judge}) if judge is not None else {}),
        },
    )


def fill_settings(cfg) -> dict:
    """What the fill was made with, for verify: the cut-off, the games a hole and the
    Bradley–Terry prior (its board's bootstrap is the board's own, ``board.json``)."""
    prior = configured_prior(cfg)
    return {"k": cfg.leaderboard.k, "games": cfg.leaderboard.fill_games,
            "prior": {"kind": prior.kind, "c": prior.c, "alpha": prior.alpha}}  # fmt: skip


def hole_shown_first(seed: int, query: str, hole: str, opponent: str) -> bool:
    """Whether a fill game shows the hole first: a bit of a checksum of (seed, game), the same
    game the same order in any rerun, half of the games either way (a generator seeded per game
    cost 0.8 s of the fill's own 2.3 s at 97K games)."""
    return bool(zlib.crc32(f"{seed}|{query}|{hole}|{opponent}".encode()) & 1)


def placed_now(fills: pl.DataFrame, known: pl.DataFrame | None) -> int:
    """The holes of ``fills`` that ``known`` (the fill before this one) did not hold."""
    if known is None or known.is_empty():
        return fills.height
    return fills.join(known.select("query_id", "document_id"), on=["query_id", "document_id"],
                      how="anti").height  # fmt: skip
