"""New-model automation: a sensor on the retriever registry and a daily backstop schedule.

A new registry entry gets its `retriever` partition and run requests for every domain (all
settings run inside each) — and nothing else is re-run. Removing an entry removes nothing: its
partition and its run files stay, the leaderboard just stops showing it.
"""

from dagster import (
    AssetKey,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MultiPartitionKey,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    schedule,
    sensor,
)

from saber_assets.leaderboard.assets import registry_path, retriever_partitions
from saber_assets.leaderboard.retrievers.registry import load_registry
from saber_assets.ontology.domains import domain_keys
from saber_assets.resources import SaberSettings


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
    names = [e.name for e in load_registry(registry_path(settings))]
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


@schedule(
    job_name="build_runs", cron_schedule="0 3 * * *", default_status=DefaultScheduleStatus.RUNNING
)
def retriever_runs_backstop(context, settings: SaberSettings):
    """Daily: any registered retriever × domain without a materialised run gets one."""
    if not benchmark_built(settings):
        return SkipReason("no benchmark to score yet")
    names = [e.name for e in load_registry(registry_path(settings))]
    have = set(context.instance.get_dynamic_partitions(retriever_partitions.name))
    missing_partitions = [n for n in names if n not in have]
    if missing_partitions:
        context.instance.add_dynamic_partitions(retriever_partitions.name, missing_partitions)
    done = {
        str(k) for k in context.instance.get_materialized_partitions(AssetKey("retriever_runs"))
    }
    todo = [
        RunRequest(
            run_key=None,
            partition_key=MultiPartitionKey({"retriever": n, "domain": d}),
            tags={"saber/trigger": "daily-backstop"},
        )
        for n in names
        for d in domain_keys(settings.load().ontology).values()
        if str(MultiPartitionKey({"retriever": n, "domain": d})) not in done
    ]
    return todo or SkipReason("every registered retriever has runs for every domain")
