"""tournament stage: Swiss (or adaptive) rounds per domain with the pair judge; resumable."""

import time

import polars as pl
from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    Output,
)

from saber_assets.lib.declare import ACCEPT_FAILED_CHECKS_TAG, stage_check, table_asset
from saber_assets.lib.metadata import llm_metadata, markdown_table, stage_metadata
from saber_assets.lib.pod_sizes import llm_pod
from saber_assets.lib.tasks import prepared_judge
from saber_assets.pipeline import PipelineResource
from saber_assets.ratings.rate import configured_prior
from saber_assets.tournament.engine import (
    TournamentQuery,
    document_numbers,
    first_shown_by_source,
    order_consistency,
    position_bias,
    run_key,
    run_tournament,
    swapped_key,
)
from saber_assets.tournament.store import SQLJudgmentStore
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource

UNPARSED_RULE = "played, no winner: the pair is not asked again and neither rating moves"


def counts_as(both_orders: bool) -> pl.Expr:
    """What a judgment row counts as in the ratings (``rate.pair_outcomes`` is the rule)."""
    if not both_orders:
        return (
            pl.when(pl.col("winner").is_null())
            .then(pl.lit(UNPARSED_RULE))
            .otherwise(pl.lit("a win for the winner"))
        )
    w, o = pl.col("winner"), pl.col("swapped_winner")
    return (
        pl.when(w.is_not_null() & o.is_not_null() & (w != o)).then(pl.lit("a tie: the two orders disagree"))
        .when(w.is_null() & o.is_not_null()).then(pl.lit("a win for the other order's winner"))
        .when(w.is_null()).then(pl.lit(UNPARSED_RULE))
        .otherwise(pl.lit("a win for the winner"))
    )  # fmt: skip


@table_asset(
    reads=("seed", "tournament", "llm", "prompts"),
    pod=llm_pod,
    kinds={"polars", "duckdb"},
    pool="llm",
)
def tournament_judgments(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    query_candidates: pl.DataFrame,
    corpus: pl.DataFrame,
) -> Output[pl.DataFrame]:
    """Every judgment of the domain's tournament (query, pair, shown first, winner, judge, round)."""
    cfg = pipeline.load()
    tcfg = cfg.tournament
    judge, text = prepared_judge(pipeline, llm, stores, corpus, query_candidates)
    number, numbering = document_numbers(corpus)
    queries = []
    for (qid,), frame in query_candidates.sort("query_id", "position").group_by(
        "query_id", maintain_order=True
    ):
        cands = frame["candidate_id"].to_list()
        texts = [text[c] for c in cands]
        queries.append(TournamentQuery(qid, text[qid], cands, texts, [number[c] for c in cands]))
    store = SQLJudgmentStore(stores.db())
    # another presentation is another tournament (the default's key is as before)
    shown = "" if tcfg.presentation == "random" else f"|{tcfg.presentation}:{numbering}"
    key = run_key(judge, cfg.seed, tcfg.policy, tcfg.rounds, extra=context.partition_key + shown)
    t0 = time.perf_counter()
    standings, stats = run_tournament(
        queries,
        judge,
        store,
        tcfg.rounds,
        cfg.seed,
        tcfg.policy,
        configured_prior(cfg),
        tcfg.adaptive_budget,
        tcfg.judge_chunk,
        key,
        on_round=lambda r, new, replayed: context.log.debug(
            f"round {r}: {new} judgments requested, {replayed} replayed so far"
        ),
        presentation=tcfg.presentation,
        order_check_share=tcfg.order_check_share,
        both_orders=tcfg.both_orders,
    )
    elapsed = time.perf_counter() - t0
    # the one rule for a judgment that never parsed (README "Bad answers are data")
    current = store.frame(key, stats["used"])  # what this tournament stands on (store.frame)
    keys = ["query", "round", "a", "b"]
    other = (
        store.frame(swapped_key(key), stats["used_swapped"])
        .select(*keys, pl.col("winner").alias("swapped_winner"), pl.col("error").alias("swapped_error"))
        # an empty result (PostgreSQL) carries no types: the keys take the judgments' own
        .cast({**{k: current.schema[k] for k in keys}, "swapped_winner": pl.String, "swapped_error": pl.String})
    )  # fmt: skip
    current = current.join(other, on=["query", "round", "a", "b"], how="left")
    df = current.drop("created_at").with_columns(counts_as=counts_as(tcfg.both_orders))
    failures = sum(s.failures for s in standings.values())
    bias = position_bias(df, tuple(tcfg.position_bias_band))
    agree, checked, agree_lo, agree_hi = order_consistency(df)
    per_round = (
        df.group_by("round")
        .agg(pl.len().alias("judgments"), pl.col("winner").is_null().sum().alias("failures"))
        .sort("round")
    )
    return Output(
        df,
        metadata={
            **stage_metadata(df.height, seconds=elapsed, by=judge),
            "queries": len(queries),
            "judge": f"{judge.backend}:{judge.model}",
            "judge_max_tokens": getattr(judge, "max_tokens", None),
            "judge_cut_off": getattr(judge, "cut_off", None),
            "judge_formula": getattr(judge, "formula", None),
            "policy": tcfg.policy,
            "rounds": tcfg.rounds,
            "seed": cfg.seed,
            "run_key": key,
            "judgments_requested": stats["requested"],
            "judgments_replayed": stats["replayed"],
            "stored_judgments_of_other_candidates": store.count(key) - current.height,
            "judge_calls_made": getattr(getattr(judge, "stats", None), "calls", 0),
            "judge_calls_cached": getattr(getattr(judge, "stats", None), "cached", 0),
            "failures": failures,
            "position_bias_first_share": round(bias.share, 4) if bias.share is not None else None,
            "position_bias_95ci": f"[{bias.low:.3f}, {bias.high:.3f}]",
            "order_checked_pairs": checked,
            "order_consistency": round(agree / checked, 4) if checked else None,
            "order_consistency_95ci": f"[{agree_lo:.3f}, {agree_hi:.3f}]" if checked else None,
            "both_orders": tcfg.both_orders,
            "presentation": tcfg.presentation
            + (f" ({numbering})" if tcfg.presentation == "by_id" else ""),
            "swapped_judgments_requested": stats["swapped_requested"],
            "per_round": markdown_table(per_round, max_rows=40),
            # whether the order shown carries a source: near 0.5 per pair of sources when not
            "first_shown_by_source": markdown_table(first_shown_by_source(df), max_rows=40),
            **llm_metadata({"judge": judge}),
        },
    )


@stage_check(
    "tournament_judgments",
    description="The judge shows no position bias: the first-shown candidate's win share stays "
    "in tournament.position_bias_band (its 95% interval not wholly outside).",
    # a failed judge stops what is rated on it in the same run, "Materialize all" in the UI too
    blocking=True,
)
def judge_position_bias(
    context: AssetCheckExecutionContext,
    pipeline: PipelineResource,
    tournament_judgments: pl.DataFrame,
) -> AssetCheckResult:
    band = tuple(pipeline.load().tournament.position_bias_band)
    bias = position_bias(tournament_judgments, band)
    # a run told to accept failed checks rates on them (the benchmark records the failure): the
    # check then fails as a warning, which blocks nothing
    accepted = context.run.tags.get(ACCEPT_FAILED_CHECKS_TAG) == "true"
    return AssetCheckResult(
        passed=not bias.biased,
        severity=AssetCheckSeverity.WARN if accepted else AssetCheckSeverity.ERROR,
        description=bias.describe(),
        metadata={
            "accepted": accepted,
            "first_wins": bias.first_wins,
            "decided": bias.decided,
            "first_share": round(bias.share, 4) if bias.share is not None else None,
            "ci_95": f"[{bias.low:.3f}, {bias.high:.3f}]",
            "band": f"[{band[0]}, {band[1]}]",
        },
    )
