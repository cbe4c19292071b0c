"""`saber build`: a thin client of Dagster's own staleness.

Dagster knows each asset's version (``versions``: code versions from config and code, data
versions of the input files and registry entries); the build asks it, stage by stage
(``stages.STAGES``), which (job, partition) steps hold a missing or unsynced asset and launches
those, here or on a deployment (``remote``). The next stage is asked only after the previous one
finished, so a stage whose upstream came out with a new data version is seen as unsynced then.
The same reasons are the ones the UI shows. Its "Materialize unsynced" button, in Dagster 1.13,
launches only the unpartitioned ones; ``sensors.sync_sensor`` (stopped by default) is the UI's
switch that launches what this build would.

One edge is checked here and not by Dagster: its stale status skips an upstream asset of which
one partition reads ≥ 100 partitions (``SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD``, e.g.
the cluster config's 140 signal shards under the signal index, or a 125-retriever roster's runs
under the leaderboard), so for exactly those edges ``fan_in_updates`` compares the upstream
partitions' data versions with the ones the asset last read (what Dagster does below the
threshold). The UI does not show such a cause; the build acts on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dagster import AssetKey, DagsterInstance, RepositoryDefinition
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import (
    SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD,
    CachingStaleStatusResolver,
    StaleStatus,
    extract_data_provenance_from_entry,
    extract_data_version_from_entry,
)
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._time import get_current_datetime

from saber_assets.config import PipelineConfig
from saber_assets.retrievers.discovery import registry_for
from saber_assets.retrievers.registry import components_of, runnable
from saber_assets.stages import BY_ALIAS, STAGES, Stage, stage_of, stage_of_asset


@dataclass
class Step:
    """One Dagster run: a job on one partition, or (``parts``: the steps of its neighbouring
    partitions, each with its own reasons) on the partition range from the first to the last."""

    job: str
    partition: str | None
    reasons: list[str] = field(default_factory=list)
    parts: list[Step] = field(default_factory=list)

    @property
    def last(self) -> str | None:
        """The range's last partition; None for a step of one partition."""
        return self.parts[-1].partition if self.parts else None

    @property
    def covers(self) -> list[str]:
        """The partitions of a range (none for a step of one partition)."""
        return [str(p.partition) for p in self.parts]

    @property
    def partitions(self) -> list[str | None]:
        return self.covers if self.parts else [self.partition]

    @property
    def label(self) -> str:
        if self.last:
            return f"{self.job} [{self.partition} … {self.last}]"
        return self.job + (f" [{self.partition}]" if self.partition else "")


def stale_resolver(instance: DagsterInstance, asset_graph) -> CachingStaleStatusResolver:
    """Dagster's stale-status resolver (the one behind the UI), fresh: it caches what it read."""
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=asset_graph,
    )
    return CachingStaleStatusResolver(instance, asset_graph, view)


def why_run(
    resolver: CachingStaleStatusResolver,
    instance: DagsterInstance,
    asset_graph,
    asset: str,
    partition: str | None,
) -> list[str]:
    """Why an asset partition needs materialising: [] when it is up to date."""
    key = AssetKey(asset)
    status = resolver.get_status(key, partition)
    if status == StaleStatus.MISSING:
        return [f"{asset}: missing"]
    out = []
    if status == StaleStatus.STALE:
        for cause in resolver.get_stale_causes(key, partition):
            dep = cause.dependency or cause.key
            where = dep.asset_key.to_user_string() + (
                f" [{dep.partition_key}]" if dep.partition_key else ""
            )
            out.append(f"{asset}: {cause.reason}" + (f" ({where})" if cause.dependency else ""))
    return (
        out
        + fan_in_updates(instance, asset_graph, key, partition)
        + first_partitions(instance, asset_graph, key, partition)
    )


def fan_in_parents(
    instance: DagsterInstance, asset_graph, key: AssetKey, partition: str | None
) -> list[tuple[AssetKey, list[str]]]:
    """The partitioned parents of which this partition reads ≥ the threshold of partitions (the
    edges Dagster's stale status skips), each with the partitions it reads."""
    out = []
    with partition_loading_context(dynamic_partitions_store=instance):
        for parent in sorted(asset_graph.get(key).parent_keys):
            if not asset_graph.get(parent).is_partitioned:
                continue
            ups = asset_graph.get_parent_partition_keys_for_child(
                partition, parent, key
            ).partitions_subset.get_partition_keys()
            if len(ups) >= SKIP_PARTITION_DATA_VERSION_DEPENDENCY_THRESHOLD:
                out.append((parent, list(ups)))
    return out


def fan_in_updates(
    instance: DagsterInstance, asset_graph, key: AssetKey, partition: str | None
) -> list[str]:
    """Upstream partitions with a new data version since ``key`` was last materialised, on the
    edges where Dagster's stale status does not look (``fan_in_parents``)."""
    mine = instance.get_latest_data_version_record(key, False, partition)
    if mine is None:
        return []
    out = []
    for parent, ups in fan_in_parents(instance, asset_graph, key, partition):
        node = asset_graph.get(parent)
        for pk in ups:
            newer = instance.get_latest_data_version_record(
                parent, node.is_external, pk, after_cursor=mine.storage_id
            )
            if newer is None:
                continue
            before = instance.get_latest_data_version_record(
                parent, node.is_external, pk, before_cursor=mine.storage_id
            )
            old = extract_data_version_from_entry(before.event_log_entry) if before else None
            if old != extract_data_version_from_entry(newer.event_log_entry):
                out.append(
                    f"{key.to_user_string()}: has a new dependency data version "
                    f"({parent.to_user_string()} [{pk}], one of {len(ups)} partitions)"
                )
                break
    return out


def first_partitions(
    instance: DagsterInstance, asset_graph, key: AssetKey, partition: str | None
) -> list[str]:
    """A partitioned parent none of whose partitions was materialised when ``key`` last ran
    (the leaderboard before the first training corpus was audited): Dagster records no cursor
    for it and never sees its later partitions as new, so a materialised one is a reason here."""
    mine = instance.get_latest_data_version_record(key, False, partition)
    if mine is None:
        return []
    provenance = extract_data_provenance_from_entry(mine.event_log_entry)
    if provenance is None:
        return []
    out = []
    with partition_loading_context(dynamic_partitions_store=instance):
        for parent in sorted(asset_graph.get(key).parent_keys):
            node = asset_graph.get(parent)
            if not node.is_partitioned or provenance.input_storage_ids.get(parent, 0) is not None:
                continue
            ups = asset_graph.get_parent_partition_keys_for_child(
                partition, parent, key
            ).partitions_subset.get_partition_keys()
            for pk in ups:
                if instance.get_latest_data_version_record(
                    parent, node.is_external, pk, after_cursor=mine.storage_id
                ):
                    out.append(
                        f"{key.to_user_string()}: has a new dependency materialization "
                        f"({parent.to_user_string()} [{pk}]; none was materialised when it last ran)"
                    )
                    break
    return out


def stage_partition_keys(
    repo: RepositoryDefinition, instance: DagsterInstance, stage: Stage
) -> list[str | None]:
    job = repo.get_job(stage.job)
    if not job.partitions_def:
        return [None]
    with partition_loading_context(dynamic_partitions_store=instance):
        return list(job.partitions_def.get_partition_keys(dynamic_partitions_store=instance))


def stage_steps(
    repo: RepositoryDefinition,
    instance: DagsterInstance,
    stage: Stage,
    keep=lambda partition: True,
    force: bool = False,
) -> list[Step]:
    """The steps of one stage (its job's partitions that ``keep`` keeps), each with the reasons
    it must run (none: up to date; ``force``: run anyway, without asking)."""
    graph = repo.asset_graph
    resolver = stale_resolver(instance, graph)
    steps = []
    for partition in stage_partition_keys(repo, instance, stage):
        if not keep(partition):
            continue
        reasons = (
            ["--force"]
            if force
            else [r for a in stage.assets for r in why_run(resolver, instance, graph, a, partition)]
        )
        steps.append(Step(stage.job, partition, reasons))
    return steps


def components_first(steps: list[Step], entries: list) -> list[Step]:
    """The runs stage's steps with every fusion after the retrievers it fuses, then each
    retriever's domains one after another: a fusion reads its components' scores from their
    runs of the same domain when those are current (``runs.saved``), a build runs
    its steps one by one, and a retriever's loaded index serves its next domain
    (``retrievers.indexes``)."""
    by_name = {e.name: e for e in entries}

    def depth(name: str) -> int:
        entry = by_name.get(name)
        if entry is None:
            return 0
        return 1 + max((depth(c) for c, _ in components_of(entry, entries)), default=-1)

    def retriever(step: Step) -> str:
        return str(step.partition).split("|")[-1]

    first = {}
    for s in steps:
        first.setdefault(retriever(s), len(first))
    return sorted(steps, key=lambda s: (depth(retriever(s)), first[retriever(s)]))


def one_launch_per_retriever(steps: list[Step], domains: Sequence[str]) -> list[Step]:
    """The runs stage's steps to run, a retriever's domains in one Dagster run: the range of
    "DOMAIN|RETRIEVER" keys from its first domain to its last is, in Dagster's multi-partition
    ranges, exactly those domains of that retriever when they are neighbours in the domain
    order (``domains``: the static dimension's). A retriever whose selected domains have gaps
    gets one run per stretch of neighbours; an up-to-date step keeps its own (no reasons: not
    run). The order of the retrievers (``components_first``) is kept."""
    place = {d: i for i, d in enumerate(domains)}
    out: list[Step] = []
    open_run: list[Step] = []

    def close() -> None:
        if len(open_run) == 1:
            out.append(open_run[0])
        elif open_run:
            reasons = [r for s in open_run for r in s.reasons]
            out.append(Step(open_run[0].job, open_run[0].partition, reasons, list(open_run)))
        open_run.clear()

    for step in steps:
        if not step.reasons or step.partition is None:
            close()
            out.append(step)
            continue
        domain, retriever = step.partition.split("|")
        if open_run:
            prev_domain, prev_retriever = str(open_run[-1].partition).split("|")
            if retriever != prev_retriever or place[domain] != place[prev_domain] + 1:
                close()
        open_run.append(step)
    close()
    return out


def runnable_entries(entries: list, say: Callable[[str], None] | None = None) -> list:
    """The registry entries a build runs (``registry.runnable``); each one left out is said to
    ``say``, with its reason (e.g. the paper registry on a machine without a GPU or an API key)."""
    run, skipped = runnable(entries)
    for name, why in skipped if say else ():
        say(f"  retriever {name} not built: {why}")
    return run


def runnable_names(
    cfg: PipelineConfig, home=None, say: Callable[[str], None] | None = None
) -> set[str]:
    return {e.name for e in runnable_entries(registry_for(cfg, home=home), say)}


def selected_stages(
    select: Sequence[str], packages: Mapping[str, Iterable[str]] | None = None
) -> list[Stage]:
    """``--select``: job aliases, job names or packages (``packages``: package -> its assets;
    a package selects every job that builds one of its assets); ``domain=KEY`` entries are not
    jobs. None: every job. A domain alone selects the jobs partitioned by domain."""
    packages = packages or {}
    names = [x for x in select if not x.startswith("domain=")]
    if names:
        wanted = set()
        for x in names:
            if x in packages and x not in BY_ALIAS:
                wanted |= {stage_of_asset(a).job for a in packages[x]}
            else:
                wanted.add(stage_of(x, packages).job)
    elif any(x.startswith("domain=") for x in select):
        wanted = {s.job for s in STAGES if s.by_domain}
    else:
        wanted = {s.job for s in STAGES}
    return [s for s in STAGES if s.job in wanted]


def partition_filter(stage: Stage, domains: Iterable[str], retrievers: set[str]):
    """Which partitions of a stage a build runs: the selected domains' (if any), and only the
    runnable registry entries' retriever partitions (a removed or unrunnable entry keeps its
    partition and its outputs, but is not built)."""
    domains = set(domains)

    def keep(partition: str | None) -> bool:
        if partition is None:
            return True
        if stage.by_domain and stage.by_retriever:
            domain, retriever = partition.split("|")
            return retriever in retrievers and (not domains or domain in domains)
        if stage.by_retriever:
            return partition in retrievers
        if stage.by_domain and domains:
            return partition in domains
        return True

    return keep
