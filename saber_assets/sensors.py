"""Sensors: new registry entries (their partitions and runs) and changed input files.

A new registry entry gets its `retriever` partition and run requests for every domain (all
settings run inside each) — and nothing else is re-run. Removing an entry removes nothing: its
partition and its run files stay, the leaderboard just stops showing it.
"""

import json

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    in_process_executor,
    sensor,
)

from saber_assets.leaderboard.retrievers.registry import definitions_by_name, load_registry
from saber_assets.lib.partitions import retriever_partitions
from saber_assets.ontology.domains import domain_keys
from saber_assets.resources import SaberSettings
from saber_assets.versions import digest, input_versions, registry_versions


def benchmark_built(settings: SaberSettings) -> bool:
    return (settings.output_dir() / "evaluation_benchmark" / "queries.parquet").exists()


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


@sensor(
    job_name="build_runs", minimum_interval_seconds=60, default_status=DefaultSensorStatus.RUNNING
)
def retriever_registry_sensor(context: SensorEvaluationContext, settings: SaberSettings):
    """Adds a partition for each new registry entry and requests only its runs."""
    names = [e.name for e in load_registry(settings.registry_path())]
    have = set(context.instance.get_dynamic_partitions(retriever_partitions.name))
    new = [n for n in names if n not in have]
    if not new:
        return SkipReason(f"no new retriever among {len(names)} registered")
    context.log.info(f"new retrievers: {new}")
    if not benchmark_built(settings):  # its runs would fail: the build runs them later
        return SensorResult(
            dynamic_partitions_requests=[retriever_partitions.build_add_request(new)],
            skip_reason="no benchmark to score yet: partitions added, runs left to the build",
        )
    return SensorResult(
        run_requests=run_requests(
            new, list(domain_keys(settings.load().ontology).values()), "registry-sensor"
        ),
        dynamic_partitions_requests=[retriever_partitions.build_add_request(new)],
    )


observe_inputs = define_asset_job(
    "observe_inputs",
    selection=AssetSelection.assets("corpus_sources", "ontology_files"),
    executor_def=in_process_executor,
    description="Observe the corpus source files and the ontology's (content hashes).",
)
observe_registry = define_asset_job(
    "observe_registry",
    selection=AssetSelection.assets("retriever_registry"),
    executor_def=in_process_executor,
    description="Observe the retriever registry, one data version per entry.",
)


@sensor(
    jobs=[observe_inputs, observe_registry],
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
)
def input_files_sensor(context: SensorEvaluationContext, settings: SaberSettings):
    """Observes the input files and the registry when their contents move, so that the UI marks
    what reads them unsynced without anyone running a build."""
    cfg = settings.load()
    have = sorted(context.instance.get_dynamic_partitions(retriever_partitions.name))
    stamps = {
        "observe_inputs": digest(input_versions(cfg)),
        # the partitions too: an entry whose partition the registry sensor adds later is
        # observed then
        "observe_registry": digest(
            [registry_versions(definitions_by_name(settings.registry_path())), have]
        ),
    }
    seen = json.loads(context.cursor) if context.cursor else {}
    moved = [job for job, stamp in stamps.items() if seen.get(job) != stamp]
    context.update_cursor(json.dumps(stamps))
    if not moved:
        return SkipReason("input files and registry unchanged since the last observation")
    context.log.info(f"observing: {', '.join(moved)}")
    return [RunRequest(job_name=job, tags={"saber/trigger": "input-files-sensor"}) for job in moved]
