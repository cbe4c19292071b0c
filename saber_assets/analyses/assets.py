"""Analyses of the built benchmark (group `analyses`): each a thin asset over a pure module."""

from __future__ import annotations

import time
import zlib

import numpy as np
import polars as pl
from dagster import AssetKey, DataVersion, MetadataValue, Output

from saber_assets.analyses import plots
from saber_assets.analyses import robustness as rb
from saber_assets.analyses.build_diff import (
    BuildState,
    diff_builds,
    diff_data,
    diff_lines,
    remember,
)
from saber_assets.analyses.composition import composition
from saber_assets.analyses.convergence import (
    convergence,
    convergence_figure,
    convergence_section,
    round_robin,
)
from saber_assets.analyses.explorer import ExplorerInputs, site_links, write_site
from saber_assets.analyses.human_agreement import (
    SUMMARY_SCHEMA,
    human_agreement,
    human_section,
    judge_choices,
    shown_first,
)
from saber_assets.analyses.human_study import (
    human_pairs,
    labels_version,
    read_human_file,
    stored_labels,
)
from saber_assets.analyses.judging_regimes import SUMMARY_SCHEMA as REGIMES_SCHEMA
from saber_assets.analyses.judging_regimes import (
    regime_agreement,
    regime_choices,
    regimes_figure,
    regimes_section,
    sample_pairs,
)
from saber_assets.analyses.math_vs_words import (
    choose_retrievers,
    math_vs_words_section,
    wins_figure,
)
from saber_assets.analyses.math_vs_words import math_vs_words as math_vs_words_table
from saber_assets.analyses.mteb import STATS_SCHEMA, mteb_figure, mteb_section, read_scores
from saber_assets.analyses.mteb import mteb_correlation as mteb_correlation_table
from saber_assets.analyses.robustness import robustness_figure
from saber_assets.analyses.signal_groups import (
    area_under,
    curves_figure,
    group_curves,
    signal_groups_section,
)
from saber_assets.benchmark.data import Benchmark
from saber_assets.io_managers import concat_partitions
from saber_assets.leaderboard.evaluate import rescore_runs
from saber_assets.leaderboard.run_files import stored_runs
from saber_assets.lib.declare import analysis, source_asset
from saber_assets.lib.metadata import (
    figure_markdown,
    llm_metadata,
    markdown_table,
    stage_metadata,
)
from saber_assets.lib.tasks import prepared_judge, prepared_tasks, tasks_for
from saber_assets.ratings.rate import configured_prior
from saber_assets.resources import PipelineResource
from saber_assets.retrievers.discovery import registry_for
from saber_assets.retrievers.registry import (
    RetrieverResources,
    build_retriever,
)
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource

CONVERGENCE_SCHEMA = {
    "policy": pl.String, "round": pl.Int64, "calls": pl.Int64, "inversions": pl.Float64,
    "share": pl.Float64, "query_id": pl.String, "n": pl.Int64,
}  # fmt: skip


@analysis(section=signal_groups_section)
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
            "plot": figure_markdown(plots.shares_figure(tables), "benchmark composition"),
            "queries": bench.queries.height,
            "documents": bench.documents.height,
            "note": MetadataValue.text(
                "a problem counts once in every sub-domain it is annotated with"
            ),
        },
    )


@analysis(section=mteb_section, deps=[AssetKey("leaderboard")])
def mteb_correlation(pipeline: PipelineResource) -> Output[pl.DataFrame]:
    """Pearson and Spearman (with 95% CIs) between the leaderboard's nDCG@10 and the MTEB
    retrieval scores of `analyses.mteb_scores`, per setting, for all matched models and for
    `analyses.recent_models`. Without a scores file: empty, with a note saying so."""
    acfg = pipeline.load().analyses
    board = pl.read_csv(pipeline.outputs().leaderboard / "leaderboard.csv")
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


def configured_regimes(pairs, text: dict[str, str], tasks, acfg):
    """``regime_choices`` with the task set's judges and the `analyses.regime_*` settings."""
    return regime_choices(
        pairs, text, tasks.pair_judge, tasks.ordinal_judge, acfg.regime_votes,
        acfg.regime_tie_margin, acfg.regime_temperature,
    )  # fmt: skip


@source_asset()
def human_labels(pipeline: PipelineResource, stores: StoresResource) -> DataVersion:
    """People's pairwise labels in the stores (`saber study pull` / `import`), of the study
    `analyses.human_study` or all: a new label marks the agreement unsynced."""
    return DataVersion(labels_version(stores.db(), pipeline.load().analyses.human_study))


@analysis(section=human_section, pool="llm", deps=[human_labels])
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
        from_file = read_human_file(acfg.human_annotations)
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
            "judge": f"{judge.backend}:{judge.model} ({judge.version})",
        },
    )


@analysis(section=regimes_section, pool="llm")
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
    t0 = time.perf_counter()
    choices, failed = configured_regimes(pairs, text, tasks, acfg)
    per_pair, summary = regime_agreement(pairs, choices, ratings, failed)
    judge = tasks.pair_judge
    return Output(
        summary,
        metadata={
            **stage_metadata(summary.height, seconds=time.perf_counter() - t0),
            "agreement": markdown_table(summary),
            "pairs": len(pairs),
            "seed": cfg.seed,
            "pair_judge": f"{judge.backend}:{judge.model} ({judge.version})",
            "ordinal_judge": f"{tasks.ordinal_judge.backend}:{tasks.ordinal_judge.model} "
            f"({tasks.ordinal_judge.version})",
            "votes": acfg.regime_votes,
            "tie_margin": acfg.regime_tie_margin,
            "vote_temperature": acfg.regime_temperature,
            "failed_judgments": MetadataValue.json(failed),
            "plot": figure_markdown(regimes_figure(summary), "judging regimes"),
            **llm_metadata({"judge + ordinal": judge}),
        },
    )


@analysis(section=convergence_section, pool="llm")
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
    parts, calls, failures = [], 0, 0
    t0 = time.perf_counter()
    for qid in chosen:
        members = cands.filter(pl.col("query_id") == qid).unique("candidate_id", keep="first")
        members = members.sort("position")["candidate_id"].to_list()
        n = len(members)
        first, second = round_robin(n, seed=cfg.seed + zlib.crc32(qid.encode()))
        out = judge.compare_batch(
            [
                (text[qid], text[members[f]], text[members[s]])
                for f, s in zip(first, second, strict=True)
            ]
        )
        p = np.array([outcome_p(o) for o in out])
        failures += int(np.sum(np.isnan(p)))
        p = np.where(np.isnan(p), 0.5, p)  # a failed judgment says nothing
        calls += len(out)
        rounds = min(n - 1, 2 * cfg.tournament.rounds)
        curve = convergence(n, first, second, p, rounds, cfg.seed, prior=configured_prior(cfg))
        parts.append(curve.with_columns(pl.lit(qid).alias("query_id"), pl.lit(n).alias("n")))
    curves = pl.concat(parts) if parts else pl.DataFrame(schema=CONVERGENCE_SCHEMA)
    mean = (
        curves.group_by("policy", "round")
        .agg(pl.col("calls").mean(), pl.col("inversions").mean(), pl.col("share").mean())
        .sort("policy", "round")
    )
    at_rounds = mean.filter(pl.col("round") == min(cfg.tournament.rounds, mean["round"].max()))
    return Output(
        curves,
        metadata={
            **stage_metadata(curves.height, seconds=time.perf_counter() - t0),
            "queries": MetadataValue.json(chosen),
            "judge": f"{judge.backend}:{judge.model} ({judge.version})",
            "exhaustive_judgments": calls,
            "failed_judgments": failures,
            f"at_{cfg.tournament.rounds}_rounds": markdown_table(at_rounds),
            "plot": figure_markdown(convergence_figure(mean), "tournament convergence")
            if mean.height
            else "no queries",
        },
    )


def outcome_p(outcome) -> float:
    """P(first better) of one judgment: the judge's probability, else its decision; NaN when
    it failed."""
    if not outcome.ok or outcome.value is None:
        return float("nan")
    if outcome.p_first is not None:
        return float(outcome.p_first)
    return 1.0 if outcome.value == 1 else 0.0


def llm_segment(segmenter):
    """The segmenter's answers as math_vs_words wants them: (math variant, words) or the error."""

    def segment(texts):
        return [
            (" ".join(f"${e}$" for e in o.value[0]), o.value[1]) if o.ok else o.error
            for o in segmenter.segment_batch(list(texts))
        ]

    return segment


@analysis(section=math_vs_words_section, deps=[AssetKey("evaluation_benchmark")], pool="llm")
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
    t0 = time.perf_counter()
    per_query, summary = math_vs_words_table(
        bench.queries, bench.documents, retrievers, tuple(acfg.math_vs_words_settings),
        segment=segmenter and llm_segment(segmenter),
        settings_of={e.name: e.settings for e in chosen if e.settings is not None},
    )  # fmt: skip
    return Output(
        summary,
        metadata={
            **stage_metadata(summary.height, seconds=time.perf_counter() - t0),
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


def second_judge(pipeline: PipelineResource, llm: LLMResource, stores: StoresResource, tasks):
    """(the robustness check's second judge, whether it sees the other order, a label)."""
    cfg = pipeline.load()
    jc = cfg.robustness.judge
    variant = jc.variant
    if variant == "auto":
        variant = "no-signals" if llm.backend in ("cpu", "synthetic") else "other-order"
    first = tasks.pair_judge
    if variant == "no-signals":
        from saber_resources.cpu_tasks import CPUPairJudge

        if not isinstance(first, CPUPairJudge):
            raise ValueError("robustness.judge.variant no-signals needs the CPU judge backend")
        we, wk, _, _ = first.scorer.weights
        judge = CPUPairJudge(first.embedder, weights=(we, wk, 0.0, 0.0))
        return judge, False, f"CPU evidence without the topic and summary terms ({judge.formula})"
    if variant == "other-order":
        return first, True, f"{first.backend}:{first.model}, the other candidate shown first"
    tcfg = cfg.tournament
    if variant == "other-model":
        if not jc.model:
            raise ValueError("robustness.judge.variant other-model needs robustness.judge.model")
        other = LLMResource(**{**{k: getattr(llm, k) for k in LLMResource.model_fields},
                               "model": jc.model})  # fmt: skip
        t2 = tasks_for(other, stores, tcfg.max_parse_retries, tcfg.judge_prompt,
                       tcfg.judge_max_tokens)  # fmt: skip
        return t2.pair_judge, False, f"{other.backend}:{jc.model}"
    prompt = jc.prompt or ("direct" if tcfg.judge_prompt == "paper" else "paper")
    t2 = tasks_for(llm, stores, tcfg.max_parse_retries, prompt, tcfg.judge_max_tokens,
                   judge_template=prompt == tcfg.judge_prompt)  # fmt: skip
    return t2.pair_judge, False, f"{first.backend}:{first.model}, the {prompt!r} judge prompt"


def registered_runs(pipeline: PipelineResource) -> pl.DataFrame:
    """Every registered retriever's stored runs (the files the leaderboard read)."""
    names = [e.name for e in registry_for(pipeline.load(), home=pipeline.home_dir())]
    cols = ["query_id", "setting", "domains", "failed", "scores", "ndcg"]
    return stored_runs(pipeline.outputs().runs, names, cols)


@analysis(section=rb.robustness_section, deps=[AssetKey("leaderboard")], pool="llm")
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
    t0 = time.perf_counter()
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
        sample = rb.sample_judgments(judgments, rcfg.judge_share, cfg.seed)
        rejudged = rb.rejudge(sample, text, judge, swap_order=swap)
        agree, n_pairs = rb.agreement(rejudged)
        prior = configured_prior(cfg)
        # both orderings from the same refit, so that an identical judge changes nothing
        base = rb.refit_ratings(
            judgments, rejudged.with_columns(winner2=pl.col("winner")), ratings, prior
        )
        new = rb.refit_ratings(judgments, rejudged, ratings, prior)
        doc_ids = bench.documents["id"].to_list()
        rel = rb.relevance_with(bench.queries, doc_ids, base)
        judge_rel = rb.relevance_with(bench.queries, doc_ids, new)
        detail = (
            f"{n_pairs} re-judged pairs, agreement {agree:.3f}" if n_pairs else "no pair re-judged"
        )
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
        **stage_metadata(table.height, seconds=time.perf_counter() - t0),
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


@analysis(
    deps=[AssetKey("leaderboard"), AssetKey("evaluation_benchmark"),
          AssetKey("benchmark_verification")],  # its header: the verdict
)  # fmt: skip
def benchmark_explorer(
    pipeline: PipelineResource,
    problem_annotations: pl.DataFrame,
    ontology_tree: pl.DataFrame,
    relevance_ratings: dict[str, pl.DataFrame],
    tournament_judgments: dict[str, pl.DataFrame],
) -> Output[pl.DataFrame]:
    """The explorer (`<outputs>/explorer/index.html`, opens from file://): the leaderboard with
    its tie groups, a page per query with its candidates, grades and judgments, and any two
    systems compared query by query (``explorer.py``)."""
    t0 = time.perf_counter()
    out = pipeline.outputs()
    bench = Benchmark.read(out.evaluation_benchmark)
    path_of = dict(ontology_tree.select("node", "path").iter_rows())
    annotations = problem_annotations.with_columns(
        pl.col("topics")
        .map_elements(lambda ts: [path_of.get(t, "") for t in ts], return_dtype=pl.List(pl.String))
        .alias("topic_paths")
    )
    board = pl.read_csv(out.leaderboard / "leaderboard.csv")
    runs = stored_runs(
        out.runs,
        board["retriever"].unique().sort().to_list(),
        ["query_id", "setting", "ndcg", "scores"],
    )
    sig = out.leaderboard / "significance.parquet"
    ratings = concat_partitions(relevance_ratings)
    current = BuildState.of("this build", bench, board, ratings)
    previous, fingerprint = remember(out.builds, current)
    current.label = f"this build ({fingerprint})"
    diff = diff_builds(previous, current) if previous is not None else None
    inputs = ExplorerInputs(
        bench=bench,
        board=board,
        tests=pl.read_parquet(sig) if sig.exists() else pl.DataFrame(),
        runs=runs,
        ratings=ratings,
        judgments=concat_partitions(tournament_judgments),
        annotations=annotations,
        downloads=site_links(),
        diff=diff_data(diff) if diff is not None else None,
    )
    written = write_site(out.explorer, inputs)
    index = out.explorer / "index.html"
    table = pl.DataFrame([{**written, "seconds": round(time.perf_counter() - t0, 2)}])
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
