"""The stage table: the one list of the build's stages that the definitions (jobs), `saber build`
(the order, `--select`) and the CLI's help read.

A stage is a Dagster job over assets of one partitioning: `saber build` runs the stages in this
order, one run per partition. Each asset says with its declaration which config sections its
outputs depend on (``reads=``); ``versions.asset_code_versions`` turns that, the source its module
runs (read from the import graph, ``code_graph``) and the asset graph into each asset's Dagster
``code_version``. The
input files (corpus sources, ontology files) and the retriever registry are not code: they are
observable source assets whose data version is their content hash (``SOURCE_ASSETS``). Pure: no
Dagster here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    """One job of the build, with everything the build, the pod sizer, the sensors and the
    partition filters need to know of it: none of them names a job (tests/test_graph.py)."""

    job: str
    alias: str  # `saber build --select ALIAS`
    description: str
    assets: tuple[str, ...]
    upstream: str | None  # the stage that must have finished first
    # what one run of the job covers: names its assets' partitions (definitions.stage_partitions)
    partitioned_by: str = ""
    # a fusion's partitions run after its components' (it reads their runs)
    fusions_last: bool = False
    # the sensors' and the schedule's job: a new retriever's work is this stage's
    serves_new_retrievers: bool = False
    # it reads the benchmark's queries: a build whose benchmark has none skips it, and says so
    reads_queries: bool = False

    @property
    def by_domain(self) -> bool:
        """Whether a `domain=NAME` selection narrows this stage's partitions."""
        return self.partitioned_by in ("domain", DOMAIN_X_RETRIEVER)

    @property
    def by_retriever(self) -> bool:
        """Whether its partitions name a registry entry (only runnable entries are built)."""
        return self.partitioned_by in ("retriever", DOMAIN_X_RETRIEVER)


DOMAIN_X_RETRIEVER = "domain × retriever"  # partition keys "DOMAIN|RETRIEVER"


# the analyses, in the order of their sections in the report (``benchmark_report``, last)
ANALYSES = (
    "benchmark_composition",
    "leaderboard_robustness",
    "signal_group_curves",
    "tournament_convergence",
    "judging_regimes",
    "judge_human_agreement",
    "mteb_correlation",
    "published_benchmark_recall",
    "published_grade_agreement",
    "math_vs_words",
    "benchmark_explorer",
    "benchmark_report",
)

STAGES: tuple[Stage, ...] = (
    Stage(
        "build_sources",
        "sources",
        "Corpus (normalised, de-duplicated) and ontology tree.",
        ("corpus", "corpus_quarantine", "corpus_duplicates", "ontology_tree"),
        None,
    ),
    Stage(
        "build_annotations",
        "annotations",
        "Topics and summaries, one annotation chunk per run.",
        ("topic_annotations", "solution_summaries"),
        "build_sources",
        "annotation chunk",
    ),
    Stage(
        "build_signal_inputs",
        "signal-inputs",
        "Information content, the per-problem annotation table (all chunks), the signal "
        "kernels' inputs and the storage floors (a first kernel pass over every pair).",
        (
            "topic_information_content",
            "problem_annotations",
            "pair_signal_inputs",
            "pair_signal_bounds",
        ),
        "build_annotations",
    ),
    Stage(
        "build_signal_shards",
        "shards",
        "All-pairs signals, one row-block shard per run.",
        ("pair_signal_shards",),
        "build_signal_inputs",
        "signal shard",
    ),
    Stage(
        "build_thresholds",
        "thresholds",
        "Index over all shards (pairs, bytes, histograms), the relevance thresholds, and the "
        "published benchmark's items found in the corpus (where its queries are taken).",
        ("pair_signal_index", "relevance_thresholds", "published_matches"),
        "build_signal_shards",
    ),
    Stage(
        "build_domains",
        "domains",
        "Candidates, tournament and ratings of one domain per run (backfill a single domain here).",
        ("query_candidates", "tournament_judgments", "relevance_ratings"),
        "build_thresholds",
        "domain",
    ),
    Stage(
        "build_benchmark",
        "benchmark",
        "Exchange-format export, the benchmark to score and its queries with a rephrasing of "
        "themselves among their own candidates.",
        ("benchmark_export", "evaluation_benchmark", "own_candidate_matches"),
        "build_domains",
    ),
    Stage(
        "build_contamination",
        "contamination",
        "The benchmark's queries and candidates found in one declared training corpus per run.",
        ("contamination",),
        "build_benchmark",
        "training corpus",
    ),
    Stage(
        "build_indexes",
        "indexes",
        "One retriever's document-side index per run, every setting (read by all its domain runs).",
        ("retriever_index",),
        "build_benchmark",
        "retriever",
    ),
    Stage(
        "build_runs",
        "runs",
        "Each retriever on every domain (retriever × domain partitions; a build runs a "
        "retriever's domains in one run).",
        ("retriever_runs",),
        "build_indexes",
        DOMAIN_X_RETRIEVER,
        fusions_last=True,
        serves_new_retrievers=True,
    ),
    Stage(
        "build_leaderboard",
        "leaderboard",
        "The full-corpus track's holes placed on their queries' scales by the judge, and the "
        "leaderboard over every registered retriever.",
        ("full_corpus_fill", "leaderboard", "benchmark_verification"),
        "build_runs",
    ),
    Stage(
        "build_analyses",
        "analyses",
        "The paper's analyses of the built benchmark and the HTML report.",
        ANALYSES,
        "build_leaderboard",
        reads_queries=True,
    ),
)

# observable source assets: their data version is the content hash of what they stand for (the
# input files; one registry entry per `retriever` partition, with the entries it fuses)
SOURCE_ASSETS = (
    "corpus_sources",
    "ontology_files",
    "retriever_registry",
    "training_corpora",
    "human_labels",
)

BY_JOB = {s.job: s for s in STAGES}
BY_ALIAS = {s.alias: s for s in STAGES}


BY_ASSET = {name: s for s in STAGES for name in s.assets}


def stage_of_asset(name: str) -> Stage:
    """The stage that builds an asset; an asset in no stage is an error naming it."""
    if name not in BY_ASSET:
        raise ValueError(f"asset {name} is in no stage of stages.STAGES")
    return BY_ASSET[name]


def stage_of(name: str, packages: Iterable[str] = ()) -> Stage:
    """A stage by its job name or its alias; an unknown name is an error listing the jobs'
    aliases (and the ``packages`` a selection may name too)."""
    stage = BY_JOB.get(name) or BY_ALIAS.get(name)
    if stage is None:
        listing = ", ".join(s.alias for s in STAGES)
        also = f"; the packages: {', '.join(sorted(packages))}" if packages else ""
        raise ValueError(f"--select {name}: no such job or package; the jobs: {listing}{also}")
    return stage


def serving_new_retrievers() -> str:
    """The job the sensors and the schedule request a new retriever's runs of."""
    return next(s.job for s in STAGES if s.serves_new_retrievers)


def select_help() -> str:
    jobs = "; ".join(f"{s.alias} ({', '.join(s.assets)})" for s in STAGES)
    return f"jobs: {jobs}; or a package (the assets of a Dagster group: corpus, signals, …)"
