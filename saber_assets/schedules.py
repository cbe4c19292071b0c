"""Schedules: the daily backstop for retriever runs."""

from dagster import (
    AssetKey,
    DefaultScheduleStatus,
    MultiPartitionKey,
    RunRequest,
    SkipReason,
    schedule,
)

from saber_assets.lib.partitions import retriever_partitions
from saber_assets.ontology.domains import domain_keys
from saber_assets.pipeline import PipelineResource
from saber_assets.retrievers.discovery import registry_for
from saber_assets.sensors import benchmark_built
from saber_assets.stages import serving_new_retrievers


@schedule(
    job_name=serving_new_retrievers(),
    cron_schedule="0 3 * * *",
    default_status=DefaultScheduleStatus.RUNNING,
)
def retriever_runs_backstop(context, pipeline: PipelineResource):
    """Daily: any registered retriever × domain without a materialised run gets one."""
    if not benchmark_built(pipeline):
        return SkipReason("no benchmark to score yet")
    names = [e.name for e in registry_for(pipeline.load(), home=pipeline.home_dir())]
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
        for d in domain_keys(pipeline.load().ontology).values()
        if str(MultiPartitionKey({"retriever": n, "domain": d})) not in done
    ]
    return todo or SkipReason("every registered retriever has runs for every domain")
