"""Sensors: new registry entries (their partitions and runs), changed input files, and the
opt-in sync sensor that runs what `saber build` would.

A new registry entry gets its `retriever` partition and run requests for every domain (all
settings run inside each) — and nothing else is re-run. Removing an entry removes nothing: its
partition and its run files stay, the leaderboard just stops showing it.
"""

import json

from dagster import (
    AssetKey,
    DagsterRunStatus,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.storage.tags import PARTITION_NAME_TAG

from saber_assets.contamination.matches import checked_corpora, training_corpus_version
from saber_assets.lib.partitions import retriever_partitions, training_partitions
from saber_assets.ontology.domains import domain_keys
from saber_assets.orchestration.observe import observe_inputs, observe_registry, observe_training
from saber_assets.orchestration.plan import Step, partition_filter, runnable_names, stage_steps
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.discovery import registry_for, tick
from saber_assets.retrievers.registry import definitions_by_name, load_registry
from saber_assets.stages import STAGES, serving_new_retrievers
from saber_assets.study.human_study import labels_version
from saber_assets.versions import digest, input_versions, registry_versions
from saber_resources.stores import StoresResource


def benchmark_built(pipeline: PipelineResource) -> bool:
    return (pipeline.outputs().evaluation_benchmark / "queries.parquet").exists()


def run_requests(names: list[str], domains: list[str], tag: str) -> list[RunRequest]:
    return [
        RunRequest(
            run_key=f"{tag}:{n}:{d}",
            partition_key=MultiPartitionKey({"retriever": n, "domain": d}),
            tags={"saber/trigger": tag},
        )
        for n in names
        for d in domains
    ]


def new_retrievers(
    pipeline: PipelineResource, new: list[str], requests: list, tag: str
) -> SensorResult:
    """New `retriever` partitions (with the other partition ``requests``) and their runs for
    every domain; without a benchmark to score, the partitions only (the build runs them)."""
    requests = [retriever_partitions.build_add_request(new), *requests]
    if not benchmark_built(pipeline):
        return SensorResult(
            dynamic_partitions_requests=requests,
            skip_reason="no benchmark to score yet: partitions added, runs left to the build",
        )
    domains = list(domain_keys(pipeline.load().ontology).values())
    return SensorResult(
        run_requests=run_requests(new, domains, tag), dynamic_partitions_requests=requests
    )


@sensor(
    job_name=serving_new_retrievers(),
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
)
def retriever_registry_sensor(context: SensorEvaluationContext, pipeline: PipelineResource):
    """Adds a partition for each new registry entry and requests only its runs; a training
    corpus a new entry declares with text gets its `training_corpus` partition (audited by the
    next build, or by the sync sensor)."""
    entries = load_registry(pipeline.registry_path())
    names = [e.name for e in entries]
    have = set(context.instance.get_dynamic_partitions(retriever_partitions.name))
    new = [n for n in names if n not in have]
    have_corpora = set(context.instance.get_dynamic_partitions(training_partitions.name))
    corpora = [c for c in checked_corpora(entries) if c not in have_corpora]
    requests = []
    if corpora:
        context.log.info(f"new training corpora to audit: {corpora}")
        requests.append(training_partitions.build_add_request(corpora))
    if not new:
        why = f"no new retriever among {len(names)} registered"
        return (
            SensorResult(dynamic_partitions_requests=requests, skip_reason=why)
            if corpora
            else SkipReason(why)
        )
    context.log.info(f"new retrievers: {new}")
    return new_retrievers(pipeline, new, requests, "registry-sensor")


@sensor(
    jobs=[observe_inputs, observe_registry, observe_training],
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
)
def input_files_sensor(
    context: SensorEvaluationContext, pipeline: PipelineResource, stores: StoresResource
):
    """Observes the input files, the registry and people's labels when they move, so that the
    UI marks what reads them unsynced without anyone running a build."""
    cfg = pipeline.load()
    have = sorted(context.instance.get_dynamic_partitions(retriever_partitions.name))
    have_corpora = sorted(context.instance.get_dynamic_partitions(training_partitions.name))
    entries = registry_for(cfg, stores.db())
    corpora = checked_corpora(entries)
    labels = labels_version(stores.db(), cfg.analyses.human_study)
    stamps = {
        observe_inputs.name: digest([input_versions(cfg), labels]),
        # the partitions too: an entry whose partition the registry sensor adds later is
        # observed then
        observe_registry.name: digest([registry_versions(definitions_by_name(entries)), have]),
        observe_training.name: digest(
            [{k: training_corpus_version(c) for k, c in corpora.items()}, have_corpora]
        ),
    }
    seen = json.loads(context.cursor) if context.cursor else {}
    moved = [job for job, stamp in stamps.items() if seen.get(job) != stamp]
    context.update_cursor(json.dumps(stamps))
    if not moved:
        return SkipReason("input files, registry and labels unchanged since the last observation")
    context.log.info(f"observing: {', '.join(moved)}")
    return [RunRequest(job_name=job, tags={"saber/trigger": "input-files-sensor"}) for job in moved]


ACTIVE = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
]


def last_run_failed(instance, step: Step) -> bool:
    tags = {PARTITION_NAME_TAG: step.partition} if step.partition else {}
    runs = instance.get_runs(filters=RunsFilter(job_name=step.job, tags=tags), limit=1)
    return bool(runs) and runs[0].status == DagsterRunStatus.FAILURE


def build_sync_sensor(jobs: list) -> SensorDefinition:
    """The UI's switch for "materialise everything unsynced", partitions included: the stage
    jobs are its targets."""

    @sensor(
        name="sync_sensor",
        jobs=jobs,
        minimum_interval_seconds=120,
        default_status=DefaultSensorStatus.STOPPED,
        description="Runs what `saber build` would run next. It is stopped by default: once on, "
        "it spends LLM time by itself after a config or code change.",
    )
    def sync_sensor(context: SensorEvaluationContext, pipeline: PipelineResource):
        """What `saber build` would run next: the earliest stage with missing or unsynced steps
        (``build.stage_steps``, Dagster's stale status plus the ≥ 100-partition edges), one run
        request per step. It requests only while no run is queued or in progress, so the next
        stage is asked once this one has finished. A step whose last run failed is not asked
        again while its reasons and its stage's code versions are the ones it failed with. A
        change to the config or the code asks again, and so does `saber build`."""
        instance = context.instance
        active = instance.get_runs(filters=RunsFilter(statuses=ACTIVE), limit=1)
        if active:
            run = active[0]
            return SkipReason(f"run {run.run_id} ({run.job_name}) is in progress: waiting")
        repo = context.repository_def
        retrievers = runnable_names(pipeline.load(), pipeline.home_dir())
        tried = json.loads(context.cursor) if context.cursor else {}
        for stage in STAGES:
            keep = partition_filter(stage, [], retrievers)
            steps = [s for s in stage_steps(repo, instance, stage, keep) if s.reasons]
            if not steps:
                continue
            code = [repo.asset_graph.get(AssetKey(a)).code_version for a in stage.assets]
            stamps = {s.label: digest([s.reasons, code]) for s in steps}
            held = [
                s
                for s in steps
                if tried.get(s.label) == stamps[s.label] and last_run_failed(instance, s)
            ]
            ask = [s for s in steps if s not in held]
            if not ask:
                return SkipReason(
                    f"{stage.job}: {len(held)} step(s) failed with the same reasons and code "
                    f"(first: {held[0].label}: {held[0].reasons[0]}); fix the cause, or run "
                    "`saber build`"
                )
            for s in ask:
                context.log.info(f"{s.label}: {'; '.join(s.reasons[:3])}")
            return SensorResult(
                run_requests=[
                    RunRequest(
                        job_name=s.job,
                        partition_key=s.partition,
                        tags={"saber/trigger": "sync-sensor"},
                    )
                    for s in ask
                ],
                cursor=json.dumps({**tried, **{s.label: stamps[s.label] for s in ask}}),
            )
        return SkipReason("every stage is synced")

    return sync_sensor


def build_discovery_sensor(minimum_interval_seconds: int) -> SensorDefinition:
    """New embedding models on the inference servers of ``discovery.endpoints``: each tick lists
    and probes (``retrievers/discovery.py``), and a newly proposed model gets its `retriever`
    partition and run requests for every domain — nothing else. The cursor keeps the last
    tick's outcome per endpoint (a skipped one with its reason)."""

    @sensor(
        name="discovery_sensor",
        job_name=serving_new_retrievers(),
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Embedding models that appear on the configured inference servers.",
    )
    def discovery_sensor(
        context: SensorEvaluationContext, pipeline: PipelineResource, stores: StoresResource
    ):
        cfg = pipeline.load()
        if not cfg.discovery.endpoints:
            return SkipReason("no discovery.endpoints configured")
        db = stores.db()
        names = {e.name for e in load_registry(pipeline.registry_path())}
        outcome = tick(db, cfg.discovery.endpoints, names)
        for endpoint, why in outcome.skipped.items():
            context.log.warning(f"discovery: endpoint {endpoint} skipped this tick: {why}")
        context.log.info(f"discovery: {outcome.summary()}")
        context.update_cursor(json.dumps({
            e.name: {"skipped": outcome.skipped[e.name]} if e.name in outcome.skipped else "ok"
            for e in cfg.discovery.endpoints
        }))  # fmt: skip
        proposed = [
            e.name
            for e in registry_for(cfg, db)
            if e.discovered is not None and e.discovered.status == "proposed"
        ]
        have = set(context.instance.get_dynamic_partitions(retriever_partitions.name))
        new = [n for n in proposed if n not in have]
        if not new:
            return SkipReason(f"no new embedding model ({outcome.summary()})")
        return new_retrievers(pipeline, new, [], "discovery-sensor")

    return discovery_sensor
