"""Analyses of the judge (group `analyses`): its agreement with people, the alternative judging
regimes and the tournament's convergence; each a thin asset over a pure module."""

from __future__ import annotations

import numpy as np
import polars as pl
from dagster import DataVersion, MetadataValue, Output

from saber_assets.analyses.convergence import (
    CONVERGENCE_SCHEMA,
    convergence_figure,
    convergence_section,
    round_robin_curves,
)
from saber_assets.analyses.judging_regimes import SUMMARY_SCHEMA as REGIMES_SCHEMA
from saber_assets.analyses.judging_regimes import (
    configured_regimes,
    regime_agreement,
    regimes_figure,
    regimes_section,
    sample_pairs,
)
from saber_assets.io_managers import concat_partitions
from saber_assets.lib.declare import JUDGE_READS, analysis, source_asset
from saber_assets.lib.metadata import (
    figure_markdown,
    llm_metadata,
    markdown_table,
    stage_metadata,
    task_label,
)
from saber_assets.lib.tasks import prepared_judge, prepared_tasks
from saber_assets.pipeline import PipelineResource
from saber_assets.ratings.rate import configured_prior
from saber_assets.study.human_agreement import (
    SUMMARY_SCHEMA,
    human_agreement,
    human_section,
    judge_choices,
    shown_first,
)
from saber_assets.study.human_study import (
    PAIRS_FILE,
    human_pairs,
    labels_version,
    read_human_file,
    stored_labels,
)
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource


@source_asset()
def human_labels(pipeline: PipelineResource, stores: StoresResource) -> DataVersion:
    """People's pairwise labels in the stores (`saber study pull` / `import`), of the study
    `analyses.human_study` or all: a new label marks the agreement unsynced."""
    return DataVersion(labels_version(stores.db(), pipeline.load().analyses.human_study))


# the judging regimes' settings: the regimes analysis and the human agreement (it scores them)
REGIME_READS = ("analyses.regime_pairs", "analyses.regime_votes", "analyses.regime_tie_margin",
                "analyses.regime_temperature")  # fmt: skip


@analysis(
    section=human_section,
    reads=(*JUDGE_READS, *REGIME_READS, "analyses.human_study", "analyses.human_annotations"),
    pool="llm",
    deps=[human_labels],
)  # fmt: skip
def judge_human_agreement(
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """Agreement of the pairwise judge and of the Bradley–Terry ranking with people's pairwise
    labels, overall and by rank distance, and between annotators, beside the paper's figures.
    The labels: the stores' ``human_labels`` (``saber study pull`` / ``import``) of pairs this
    benchmark rates, and the `analyses.human_annotations` file where one is configured. Without
    either: empty, with a note saying so."""
    cfg = pipeline.load()
    acfg = cfg.analyses
    ratings = concat_partitions(relevance_ratings)
    stored = stored_labels(stores.db(), acfg.human_study)
    rated = ratings.select(query="query_id", candidate="candidate_id").unique()
    ours = stored.join(
        rated.rename({"candidate": "shown_first"}), on=["query", "shown_first"], how="semi"
    ).join(rated.rename({"candidate": "shown_second"}), on=["query", "shown_second"], how="semi")
    from_file = None
    if acfg.human_annotations is not None:
        # read against the home's study where there is one, as `saber study import` reads it
        study_pairs = pipeline.outputs().human_study / PAIRS_FILE
        study = pl.read_parquet(study_pairs) if study_pairs.is_file() else None
        if study is not None and acfg.human_study:
            study = study.filter(pl.col("study") == acfg.human_study)
        from_file = read_human_file(acfg.human_annotations, study, set(rated.iter_rows()))
    parts = [x for x in (human_pairs(ours) if ours.height else None, from_file) if x is not None]
    origin = {
        "labels_stored": ours.height,
        "labels_stored_for_other_benchmarks": stored.height - ours.height,
        "labels_from_file": 0 if from_file is None else from_file.height,
    }
    if not parts:
        note = ("no human labels: none stored (saber study pull / import) and no "
                "analyses.human_annotations file configured")  # fmt: skip
        empty = pl.DataFrame(schema=SUMMARY_SCHEMA)
        return Output(empty, metadata={**stage_metadata(0), "note": note, **origin})
    humans = pl.concat(parts, how="diagonal_relaxed")
    tasks, text = prepared_tasks(pipeline, llm, stores, corpus, ratings)
    pairs = sorted(set(humans.select("query", "a", "b").iter_rows()))
    shown = shown_first(humans)
    choices = judge_choices(tasks.pair_judge, text, pairs, shown, cfg.seed)
    regimes, _ = configured_regimes(pairs, text, tasks, acfg)
    regimes.pop("pairwise_single")  # the judge asked once, in the people's order, stands for it
    scored, summary = human_agreement(humans, {"pairwise_judge": choices, **regimes}, ratings)
    judge = tasks.pair_judge
    return Output(
        summary,
        metadata={
            **stage_metadata(summary.height),
            "agreement": markdown_table(summary),
            "annotations": humans.height,
            "annotators": humans["annotator"].n_unique(),
            **origin,
            "pairs_judged": len(choices),
            # the order the judge saw each pair in: as people saw it, or seeded where unrecorded
            "order": f"{len(shown)} pairs as shown to people, {len(pairs) - len(shown)} seeded",
            "seed": cfg.seed,
            "judge": task_label(judge),
        },
    )


@analysis(
    section=regimes_section, reads=(*JUDGE_READS, *REGIME_READS), pool="llm"
)  # fmt: skip
def judging_regimes(
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """The paper's alternative judges on `analyses.regime_pairs` seeded candidate pairs: an
    ordinal 0–100 judge and a majority vote of `analyses.regime_votes` pairwise draws, with the
    single pairwise answer beside them; agreement with the tournament's BT ranking, overall and
    by rank distance Δr ≥ 0, 25, 50."""
    cfg = pipeline.load()
    acfg = cfg.analyses
    if acfg.regime_pairs == 0:
        note = "analyses.regime_pairs is 0: no pairs judged"
        return Output(
            pl.DataFrame(schema=REGIMES_SCHEMA), metadata={**stage_metadata(0), "note": note}
        )
    ratings = concat_partitions(relevance_ratings)
    tasks, text = prepared_tasks(pipeline, llm, stores, corpus, ratings)
    pairs = sample_pairs(ratings, acfg.regime_pairs, cfg.seed)
    choices, failed = configured_regimes(pairs, text, tasks, acfg)
    per_pair, summary = regime_agreement(pairs, choices, ratings, failed)
    judge = tasks.pair_judge
    return Output(
        summary,
        metadata={
            **stage_metadata(summary.height),
            "agreement": markdown_table(summary),
            "pairs": len(pairs),
            "seed": cfg.seed,
            "pair_judge": task_label(judge),
            "ordinal_judge": task_label(tasks.ordinal_judge),
            "votes": acfg.regime_votes,
            "tie_margin": acfg.regime_tie_margin,
            "vote_temperature": acfg.regime_temperature,
            "failed_judgments": MetadataValue.json(failed),
            "plot": figure_markdown(regimes_figure(summary), "judging regimes"),
            **llm_metadata({"judge + ordinal": judge}),
        },
    )


@analysis(
    section=convergence_section,
    reads=(*JUDGE_READS, "ratings", "analyses.convergence", "analyses.convergence_queries"),
    pool="llm",
)
def tournament_convergence(
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    query_candidates: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """On `analyses.convergence_queries` seeded queries, an exhaustive round-robin with the
    configured judge (cached answers reused), and the inversions of Swiss, random, adaptive and
    efficient rankings against it after each round's worth of calls. Opt-in
    (`analyses.convergence: true`): it costs n(n−1)/2 judge calls per query."""
    cfg = pipeline.load()
    if not cfg.analyses.convergence:
        note = "analyses.convergence is off (it costs n(n-1)/2 judge calls per query)"
        empty = pl.DataFrame(schema=CONVERGENCE_SCHEMA)
        return Output(empty, metadata={**stage_metadata(0), "note": note})
    cands = concat_partitions(query_candidates).sort("query_id", "position")
    judge, text = prepared_judge(pipeline, llm, stores, corpus, cands)
    ids = sorted(cands["query_id"].unique().to_list())
    k = min(cfg.analyses.convergence_queries, len(ids))
    chosen = sorted(np.random.default_rng([cfg.seed, 7]).choice(ids, k, replace=False).tolist())
    curves, calls, failures = round_robin_curves(
        judge, text, cands, chosen, cfg.seed, 2 * cfg.tournament.rounds, configured_prior(cfg)
    )
    mean = (
        curves.group_by("policy", "round")
        .agg(pl.col("calls").mean(), pl.col("inversions").mean(), pl.col("share").mean())
        .sort("policy", "round")
    )
    at_rounds = mean.filter(pl.col("round") == min(cfg.tournament.rounds, mean["round"].max()))
    return Output(
        curves,
        metadata={
            **stage_metadata(curves.height),
            "queries": MetadataValue.json(chosen),
            "judge": task_label(judge),
            "exhaustive_judgments": calls,
            "failed_judgments": failures,
            f"at_{cfg.tournament.rounds}_rounds": markdown_table(at_rounds),
            "plot": figure_markdown(convergence_figure(mean), "tournament convergence")
            if mean.height
            else "no queries",
        },
    )
