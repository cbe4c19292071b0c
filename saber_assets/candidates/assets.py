"""candidates stage: per domain, viable queries with K topic-only, K summary-only, K both."""

import json
import time
from dataclasses import dataclass

import polars as pl
from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    MetadataValue,
    Output,
)

from saber_assets.candidates.coverage import domain_coverage
from saber_assets.candidates.rows import candidates_by_rows
from saber_assets.candidates.select import (
    GROUPS,
    SelectionSpec,
    given_rows,
    home_domain,
    select_candidates,
    selection_key,
    short_strata,
    strata_drawn,
    strata_quotas,
)
from saber_assets.lib.declare import stage_check, table_asset
from saber_assets.lib.metadata import markdown_table, stage_metadata
from saber_assets.ontology.domains import domain_names, domain_title
from saber_assets.outputs import written_whole
from saber_assets.pipeline import PipelineResource
from saber_assets.signals.prepare import SignalInputs, signal_pool
from saber_assets.signals.stored import (
    cut_viable_rows,
    gather_budget,
    load_summaries,
    read_floors,
    signals_dir,
    stored_pairs,
    summary_digests,
)
from saber_assets.signals.summaries import viable_at
from saber_assets.signals.thresholds import Cut, ExactSignals


@table_asset(reads=("seed", "candidates"), deps=["pair_signal_index"])
def query_candidates(
    context: AssetExecutionContext,
    pipeline: PipelineResource,
    problem_annotations: pl.DataFrame,
    relevance_thresholds: pl.DataFrame,
    published_matches: pl.DataFrame,
) -> Output[pl.DataFrame]:
    """The domain's queries and their 3K candidates (group label and both signals kept); with
    `candidates.published_queries`, the queries are the published ones the corpus holds."""
    cfg = pipeline.load()
    cand = cfg.candidates
    pool = signal_pool(problem_annotations, cand.require_annotations)
    sel = whole_selection(pipeline, pool, relevance_thresholds, published_matches)
    all_sel, select, t_thr, s_thr, exact = sel.frame, sel.spec, sel.t_thr, sel.s_thr, sel.exact
    domain = domain_title(cfg.ontology, context.partition_key)
    df = all_sel.filter(pl.col("domain") == domain)
    domains_of = problem_annotations.select(
        pl.col("id").alias("query_id"), pl.col("domains").alias("query_domains")
    )
    df = df.join(domains_of, on="query_id", how="left")
    n_q = df["query_id"].n_unique()
    if select["given"]:  # the published queries homed here, viable or not
        homes = [home_domain(select["domains"][r], select["domain_order"]) for r in select["given"]]
        quota = homes.count(domain)
    elif cand.strata:
        quota = strata_quotas(select["strata"], select["domain_order"])[domain]
    else:
        quota = cand.quota_per_domain
    counts = domain_coverage(
        problem_annotations, relevance_thresholds.filter(pl.col("domain") == domain),
        {domain: n_q}, quota, cand.require_annotations,
    ).row(0, named=True)  # fmt: skip
    if n_q < quota:
        context.log.warning(f"{domain}: {n_q} queries for a quota of {quota}, {counts['status']}")
    strata = {}
    if cand.strata:
        drawn = all_sel.select("query_id").unique().join(domains_of, on="query_id", how="left")
        table = pl.DataFrame(
            strata_drawn(select["strata"], drawn["query_domains"].to_list(), select["domain_order"])
        )
        strata = {"strata": markdown_table(table)}
        for line in short_strata(table.to_dicts(), domain):  # said once: by its home partition
            context.log.warning(line)
    return Output(
        df,
        metadata={
            **stage_metadata(df.height),
            "queries": n_q,
            "quota": quota,
            **strata,
            "status": counts["status"],
            "domain_problems": counts["problems"],
            "domain_annotated": counts["annotated"],
            "domain_viable_queries": counts["viable"],
            "candidates_per_group_K": cand.candidates_per_group,
            "thresholds": json.dumps(
                {
                    name: thr.tau if isinstance(thr, Cut) else thr / 255
                    for name, thr in (("topic", t_thr), ("summary", s_thr))
                }
            ),
            "threshold_rule": cand.threshold_rule,
            "exact_recomputed_pairs": exact.recomputed,
            "seed": cfg.seed,
            "selection": "reused" if sel.reused else "computed",
            "selection_seconds": round(sel.seconds, 2),
            "per_group_mean_signals": markdown_table(
                df.group_by("group")
                .agg(pl.len(), pl.col("topic").mean().round(3), pl.col("summary").mean().round(3))
                .sort("group")
            ),
            "example_query": MetadataValue.text(df["query_id"][0] if df.height else "none"),
        },
    )


@stage_check(
    "query_candidates",
    description="3K candidates per query, K per group, no self-candidate, no duplicates.",
)
def candidates_well_formed(
    context, pipeline: PipelineResource, query_candidates: pl.DataFrame
) -> AssetCheckResult:
    k = pipeline.load().candidates.candidates_per_group
    df = query_candidates
    per_query = df.group_by("query_id").agg(
        pl.len().alias("n"), pl.col("candidate_id").n_unique().alias("distinct")
    )
    per_group = df.group_by("query_id", "group").len()
    bad_total = per_query.filter(pl.col("n") != 3 * k).height
    bad_group = per_group.filter(pl.col("len") != k).height + (
        per_query.height * len(GROUPS) - per_group.height
    )
    self_cands = df.filter(pl.col("query_id") == pl.col("candidate_id")).height
    dupes = per_query.filter(pl.col("distinct") != pl.col("n")).height
    return AssetCheckResult(
        passed=bad_total == 0 and bad_group == 0 and self_cands == 0 and dupes == 0,
        metadata={
            "queries": per_query.height,
            "wrong_total": bad_total,
            "wrong_group_size": bad_group,
            "self_candidates": self_cands,
            "queries_with_duplicates": dupes,
        },
    )


@dataclass
class WholeSelection:
    """Every domain's queries and candidates (one selection over all stored pairs), what it was
    drawn with, and whether it was read back (another partition computed it) or computed."""

    frame: pl.DataFrame
    spec: dict
    t_thr: Cut | int
    s_thr: Cut | int
    exact: ExactSignals
    reused: bool
    seconds: float


def whole_selection(pipeline: PipelineResource, pool: pl.DataFrame,
                    relevance_thresholds: pl.DataFrame,
                    published_matches: pl.DataFrame) -> WholeSelection:  # fmt: skip
    """The selection every domain partition needs (two passes over every shard file): the
    first partition computes it, the others read it back by its content key."""
    cfg = pipeline.load()
    cand = cfg.candidates
    by_rows = cfg.signals.layout == "summaries"
    if by_rows:
        inputs = SignalInputs.load(signals_dir(pipeline) / "inputs.npz")
        if inputs.ids != pool["id"].to_list():
            raise ValueError(
                "the signal inputs were computed for another corpus: rematerialise them"
            )
    else:
        inputs, pairs = stored_pairs(pipeline, pool["id"].to_list())
    row = relevance_thresholds.row(0, named=True)
    # exact where given or taken as a percentile (a `*_tau`), else the derived quanta
    t_thr, s_thr = (
        Cut(row[f"{s}_tau"], cand.threshold_rule)
        if row.get(f"{s}_tau") is not None
        else int(row[f"{s}_threshold_q"])
        for s in ("topic", "summary")
    )
    exact = ExactSignals.of(inputs)
    select = {
        "ids": inputs.ids,
        "domains": pool["domains"].to_list(),
        "domain_order": domain_names(cfg.ontology),
        "t_thr": t_thr,
        "s_thr": s_thr,
        "k": cand.candidates_per_group,
        "quota": cand.quota_per_domain,
        "seed": cfg.seed,
        "strata": [(s.domains, s.count) for s in cand.strata],
        "given": given_rows(inputs.ids, published_matches) if cand.published_queries else (),
    }
    # every domain partition needs the same selection over all stored pairs (two passes over
    # every shard file): the first computes it, the others read it back by its content key
    d = signals_dir(pipeline)
    key = selection_key(summary_digests(d) if by_rows else pairs.digests(), **select)
    path = d / "selection" / f"{key}.parquet"
    t0 = time.perf_counter()
    reused = path.exists()
    if reused:
        all_sel = pl.read_parquet(path)
    elif by_rows:
        # the summaries answer thresholds in quanta; numbers were counted over the triangle
        # by the thresholds asset (read back here, or counted again where missing)
        floors, k = read_floors(d), cand.candidates_per_group
        if isinstance(t_thr, Cut) and isinstance(s_thr, Cut):
            viable = cut_viable_rows(d, inputs, (t_thr, s_thr), k, exact, cfg.signals.threads)
        else:
            viable = viable_at(load_summaries(d, inputs, k, floors), t_thr, s_thr)
        all_sel = candidates_by_rows(inputs, SelectionSpec(**select), floors, viable, exact)
    else:
        # one read of the shard files where the pairs fit in memory, else one per pass
        held = pairs.held(gather_budget(cfg.signals.gather_memory_gib))
        all_sel = select_candidates(pairs=held.chunks, exact=exact, **select)
    if not reused:
        path.parent.mkdir(parents=True, exist_ok=True)
        with written_whole(path) as tmp:
            all_sel.write_parquet(tmp)
        for old in path.parent.glob("*.parquet"):
            if old != path:
                old.unlink(missing_ok=True)
    return WholeSelection(all_sel, select, t_thr, s_thr, exact, reused, time.perf_counter() - t0)
