"""`saber build --on URL`: the same build, launched on a running Dagster webserver.

The stages and their partitions come from the same config and code (``build``); which steps to
launch, the deployment's own Dagster says: it observes the input files and the registry first
(runs of ``observe_inputs`` and ``observe_registry``), then, stage by stage, a step is submitted
through GraphQL as a run of its job and partition where one of its assets is missing or unsynced
there (``staleStatusByPartition``, what its UI shows). The partitions of one stage are submitted
together — the deployment's queued run coordinator and the ``llm`` pool decide how many run at
once — and the next stage is asked when all of them have finished. A failed run stops the build;
the command exits non-zero naming it. On the ≥ 100-partition edges that Dagster's stale status
skips (``build.fan_in_parents``), a fresh step is checked as a local build checks it: an upstream
partition whose data version changed since the step's asset was last materialised
(``changed_since``, over the deployment's asset events).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from urllib.parse import urlparse

from dagster._core.definitions.data_version import DATA_VERSION_TAG

from saber_assets.orchestration.observe import OBSERVE_JOBS

TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}
EVENT_FIELDS = "partition timestamp tags { key value }"
FAN_IN_QUERY = f"""
query SaberFanIn($key: AssetKeyInput!, $partitions: [String!]) {{
  assetOrError(assetKey: $key) {{
    ... on Asset {{
      assetMaterializations(partitions: $partitions) {{ {EVENT_FIELDS} }}
      assetObservations(partitions: $partitions) {{ {EVENT_FIELDS} }}
    }}
  }}
}}
"""
LATEST_QUERY = f"""
query SaberLatest($key: AssetKeyInput!, $partitions: [String!]) {{
  assetOrError(assetKey: $key) {{
    ... on Asset {{ assetMaterializations(partitions: $partitions, limit: 1) {{ {EVENT_FIELDS} }} }}
  }}
}}
"""
RUNS_QUERY = """
query SaberRuns($filter: RunsFilter, $limit: Int) {
  runsOrError(filter: $filter, limit: $limit) {
    __typename
    ... on Runs { results { runId status } }
    ... on PythonError { message }
  }
}
"""
RUN_ERRORS = """
query SaberRunErrors($runId: ID!) {
  logsForRun(runId: $runId) {
    __typename
    ... on EventConnection {
      events {
        __typename
        ... on ExecutionStepFailureEvent {
          stepKey error { message errorChain { error { message } } }
        }
        ... on RunFailureEvent { message }
      }
    }
    ... on PythonError { message }
  }
}
"""
STALE_QUERY = """
query SaberStale($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) { assetKey { path } staleStatus }
}
"""
STALE_BY_PARTITION = """
query SaberStaleByPartition($keys: [AssetKeyInput!], $partitions: [String!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    staleStatusByPartition(partitions: $partitions)
  }
}
"""
ADD_PARTITION = """
mutation SaberAddPartition($selector: RepositorySelector!, $name: String!, $key: String!) {
  addDynamicPartition(repositorySelector: $selector, partitionsDefName: $name, partitionKey: $key) {
    __typename
    ... on PythonError { message }
    ... on UnauthorizedError { message }
  }
}
"""


class RemoteBuildError(RuntimeError):
    pass


class Deployment:
    """A Dagster webserver reached through GraphQL."""

    def __init__(self, url: str, location: str = "saber", repository: str = "__repository__"):
        from dagster_graphql import DagsterGraphQLClient

        u = urlparse(url if "://" in url else f"http://{url}")
        self.url = url
        self.client = DagsterGraphQLClient(
            u.hostname or "127.0.0.1", port_number=u.port, use_https=u.scheme == "https"
        )
        self.location, self.repository = location, repository

    def _query(self, query: str, variables: dict) -> dict:
        return self.client._execute(query, variables)  # the client's own transport

    def stale(self, assets: tuple[str, ...], partitions: list[str | None]) -> dict:
        """(asset, partition) -> FRESH / STALE / MISSING, as the deployment's UI shows it; the
        assets of one stage share its partitioning (``partitions`` [None]: unpartitioned)."""
        keys = [{"path": [a]} for a in assets]
        keyed = [p for p in partitions if p is not None]
        if keyed:
            data = self._query(STALE_BY_PARTITION, {"keys": keys, "partitions": keyed})
        else:
            data = self._query(STALE_QUERY, {"keys": keys})
        nodes = {n["assetKey"]["path"][-1]: n for n in data["assetNodes"]}
        missing = [a for a in assets if a not in nodes]
        if missing:
            raise RemoteBuildError(f"{self.url}: the deployment has no asset {missing[0]!r}")
        out = {}
        for a, node in nodes.items():
            if keyed:
                statuses = node["staleStatusByPartition"]
                out.update(zip([(a, p) for p in keyed], statuses, strict=True))
            else:
                out[(a, None)] = node["staleStatus"]
        return out

    def fan_in_updates(
        self, asset: str, partition: str | None, parent: str, ups: list[str]
    ) -> list[str]:
        """``build.fan_in_updates`` on the deployment: the parent's partitions (of ``ups``) whose
        data version moved since ``asset`` [``partition``] was last materialised there."""
        mine = self._query(
            LATEST_QUERY,
            {"key": {"path": [asset]}, "partitions": [partition] if partition else None},
        )["assetOrError"].get("assetMaterializations")
        if not mine:
            return []  # never materialised: its stale status says missing
        found = self._query(FAN_IN_QUERY, {"key": {"path": [parent]}, "partitions": ups})
        asset_events = found["assetOrError"]
        events = [
            *asset_events.get("assetMaterializations", []),
            *asset_events.get("assetObservations", []),
        ]
        return changed_since(float(mine[0]["timestamp"]), events)

    def add_partitions(self, name: str, keys: list[str]) -> None:
        selector = {"repositoryLocationName": self.location, "repositoryName": self.repository}
        for key in keys:
            out = self._query(ADD_PARTITION, {"selector": selector, "name": name, "key": key})
            kind = out["addDynamicPartition"]["__typename"]
            if kind not in ("AddDynamicPartitionSuccess", "DuplicateDynamicPartitionError"):
                raise RemoteBuildError(
                    f"cannot add partition {key!r} of {name!r}: {out['addDynamicPartition']}"
                )

    def submit(self, job: str, partition: str | None, tags: dict[str, str]) -> str:
        tags = dict(tags)
        if partition is not None:
            tags["dagster/partition"] = partition
            if "|" in partition:  # a retriever × domain run: the dimension tags as the UI sets
                domain, retriever = partition.split("|")
                tags["dagster/partition/domain"] = domain
                tags["dagster/partition/retriever"] = retriever
        return self.client.submit_job_execution(
            job, repository_location_name=self.location, repository_name=self.repository, tags=tags
        )

    def status(self, run_id: str) -> str:
        return self.client.get_run_status(run_id).value

    def statuses(self, run_ids: list[str]) -> dict[str, str]:
        """Each run's status, in one query (a stage may wait on hundreds of partitions' runs)."""
        data = self._query(RUNS_QUERY, runs_variables(run_ids))
        try:
            return run_statuses(data, run_ids)
        except RemoteBuildError as exc:
            raise RemoteBuildError(f"{self.url}: {exc}") from None

    def failure(self, run_id: str) -> str:
        """Why a run failed, as its event log says; never raises (the build is failing already)."""
        try:
            return failure_summary(self._query(RUN_ERRORS, {"runId": run_id}))
        except Exception as exc:  # the server may be going away; the run id still names it
            return f"(its event log could not be read: {exc})"


def runs_variables(run_ids: list[str]) -> dict:
    """``RUNS_QUERY``'s variables for these runs."""
    return {"filter": {"runIds": run_ids}, "limit": len(run_ids)}


def run_statuses(data: dict, run_ids: list[str]) -> dict[str, str]:
    """{run id: status} from ``RUNS_QUERY``'s answer; a run it does not list is an error."""
    runs = data["runsOrError"]
    if runs["__typename"] != "Runs":
        raise RemoteBuildError(f"cannot read run statuses: {runs.get('message', runs)}")
    found = {r["runId"]: r["status"] for r in runs["results"]}
    lost = [r for r in run_ids if r not in found]
    if lost:
        raise RemoteBuildError(f"the deployment has no run {lost[0]}")
    return found


def changed_since(child_ms: float, events: list[dict]) -> list[str]:
    """The upstream partitions whose latest data version after ``child_ms`` (the child's last
    materialisation) differs from their latest one before it: the events are the deployment's
    materialisations and observations (``partition``, ``timestamp`` in ms, ``tags``)."""
    before: dict[str, tuple[float, str | None]] = {}
    after: dict[str, tuple[float, str | None]] = {}
    for e in events:
        ts = float(e["timestamp"])
        version = next((t["value"] for t in e["tags"] if t["key"] == DATA_VERSION_TAG), None)
        side = after if ts > child_ms else before
        if e["partition"] not in side or side[e["partition"]][0] < ts:
            side[e["partition"]] = (ts, version)
    return sorted(p for p, (_, v) in after.items() if v != before.get(p, (0.0, None))[1])


def _root_cause(error: dict) -> str:
    # Dagster wraps an op's exception ("Error occurred while executing op ..."); the raised
    # error, which names the actual problem, is the chain's last link
    chain = [link["error"]["message"] for link in error.get("errorChain") or []]
    return (chain or [error.get("message", "")])[-1].strip()


def failure_summary(data: dict, limit: int = 1500) -> str:
    """The failed steps' error messages (or the run's own failure message) from ``RUN_ERRORS``."""
    logs = data.get("logsForRun") or {}
    if logs.get("__typename") != "EventConnection":
        return f"(its event log could not be read: {logs.get('message', logs)})"
    steps = [
        f"{e['stepKey']}: {_root_cause(e.get('error') or {})}"
        for e in logs["events"]
        if e.get("__typename") == "ExecutionStepFailureEvent"
    ]
    runs = [e["message"] for e in logs["events"] if e.get("__typename") == "RunFailureEvent"]
    text = "\n".join(steps or runs) or "(no failure event in its log)"
    return text if len(text) <= limit else text[:limit] + " …"


def build_on(
    url: str,
    plan: list,
    partitions: dict[str, list[str]],
    force: bool,
    poll_s: tuple[float, float] = (0.25, 2.0),
    fan_in: dict | None = None,
    say: Callable[[str], None] = print,
    say_error: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
) -> int:
    """Run the build on the deployment at ``url``: ``plan`` is [(stage, its partitions)] in
    order, ``fan_in`` {(asset, partition): [(parent, its partitions)]} the edges to check past
    the stale status (``build.fan_in_parents``), ``partitions`` the dynamic partitions (by
    partitioning name) to add first; 0 on success, 1 naming a failed run. Runs are polled every
    ``poll_s[0]`` seconds, the wait doubling to ``poll_s[1]`` while none ends: a stage of short
    runs goes on a moment after its last one, a long one is not asked about every moment.
    Progress lines go to ``say``, a failed run's to ``say_error``."""
    fan_in = fan_in or {}
    dep = Deployment(url)
    for name, keys in partitions.items():
        dep.add_partitions(name, keys)
    t0 = time.perf_counter()
    launched = skipped = 0
    peak = 0

    def run_all(steps: list[tuple[str, str | None]]) -> bool:
        nonlocal peak
        pending = {}
        for job, partition in steps:
            label = job + (f" [{partition}]" if partition else "")
            run_id = dep.submit(job, partition, {})
            pending[run_id] = label
            say(f"  launched {label:<45} run {run_id}")
        wait = poll_s[0]
        while pending:
            time.sleep(wait)
            statuses = dep.statuses(list(pending))
            peak = max(peak, sum(s == "STARTED" for s in statuses.values()))
            ended = any(s in TERMINAL for s in statuses.values())
            wait = poll_s[0] if ended else min(wait * 2, poll_s[1])
            for rid, status in statuses.items():
                if status in TERMINAL:
                    label = pending.pop(rid)
                    say(f"  {status.lower():<8} {label:<45} run {rid}")
                    if status != "SUCCESS":
                        why = dep.failure(rid) if status == "FAILURE" else "canceled"
                        say_error(
                            f"saber build --on {url}: run {rid} ({label}) ended {status}; "
                            f"see it in the Dagster UI\n{why}"
                        )
                        return False
        return True

    if not run_all([(job.name, None) for job in OBSERVE_JOBS]):
        return 1
    for stage, partitions in plan:
        status = {} if force else dep.stale(stage.assets, partitions)
        todo = []
        for p in partitions:
            if force or any(status[(a, p)] != "FRESH" for a in stage.assets):
                todo.append((stage.job, p))
                continue
            moved = next(
                (
                    f"{a}: has a new dependency data version ({parent} [{changed[0]}])"
                    for a in stage.assets
                    for parent, ups in fan_in.get((a, p), [])
                    if (changed := dep.fan_in_updates(a, p, parent, ups))
                ),
                None,
            )
            if moved:  # lazily: the first moved edge decides
                say(f"  {moved}")
                todo.append((stage.job, p))
        skipped += len(partitions) - len(todo)
        launched += len(todo)
        if not run_all(todo):
            return 1
    say(
        f"saber build --on {url}: {launched} runs launched (peak {peak} at once), "
        f"{skipped} up to date, {time.perf_counter() - t0:.1f}s"
    )
    return 0
