"""How many launched runs would sit in their pods waiting for an `llm` slot, under the cluster's
settings, with pool granularity `op` (the chart's default) and `run` (deploy/helm/values.yaml).

Dagster's own dequeue counter (``GlobalOpConcurrencyLimitsCounter``, the one the queued run
coordinator daemon uses) is asked about a queue of N runs of each saber job that uses the pool,
with each job's real execution-plan concurrency info, against `concurrency.pools.defaultLimit`
slots and `concurrency.runs.maxConcurrentRuns`. A run dequeued while the pool is full is a pod
that starts (2 CPU / 8 GiB for build_runs) only to wait.

    uv run python perf/pool_granularity.py [--queued 32]
"""

from __future__ import annotations

import argparse
import warnings

import yaml

from saber_assets.config import REPO_ROOT
from saber_assets.lib.pod_sizes import llm_pod, runs_pod
from saber_assets.pods import job_pods

warnings.filterwarnings("ignore")
# the jobs whose pods wait on the served model or run the retrievers: the annotations, the
# tournaments, the runs
JOBS = tuple(job for job, pod in job_pods().items() if pod in (llm_pod, runs_pod))


def run_op_concurrency(job_def):
    from dagster._core.execution.api import create_execution_plan
    from dagster._core.op_concurrency_limits_counter import (
        compute_run_op_concurrency_info_for_snapshot,
    )
    from dagster._core.snap import snapshot_from_execution_plan

    plan = create_execution_plan(job_def)
    snap = snapshot_from_execution_plan(plan, job_def.get_job_snapshot_id())
    return compute_run_op_concurrency_info_for_snapshot(snap)


def launched(instance, runs, granularity: str, max_runs: int) -> int:
    from dagster._core.instance.config import PoolGranularity
    from dagster._core.op_concurrency_limits_counter import GlobalOpConcurrencyLimitsCounter

    counter = GlobalOpConcurrencyLimitsCounter(
        instance, runs, [], concurrency_keys=instance.event_log_storage.get_concurrency_keys(),
        pool_limits=instance.event_log_storage.get_pool_limits(),
        pool_granularity=PoolGranularity(granularity),
    )  # fmt: skip
    n = 0
    for run in runs:
        if n >= max_runs:
            break
        if not counter.is_blocked(run):
            counter.update_counters_with_launched_item(run)
            n += 1
    return n


def main() -> None:
    import os

    from dagster import DagsterRunStatus
    from dagster._core.storage.dagster_run import DagsterRun
    from dagster._core.test_utils import instance_for_test

    from saber_assets.definitions import make_definitions

    # (runs stand for queued ones: the counter reads their pools only)
    # the plan reads the resources' config: stand-ins for the pods' secrets (nothing is called)
    for var in ("VLLM_API_KEY", "SABER_PG_DSN"):
        os.environ.setdefault(var, "unused")

    parser = argparse.ArgumentParser()
    parser.add_argument("--queued", type=int, default=32, help="queued runs of each job")
    args = parser.parse_args()
    values = yaml.safe_load((REPO_ROOT / "deploy/helm/values.yaml").read_text())
    limit = values["concurrency"]["pools"]["defaultLimit"]
    max_runs = values["concurrency"]["runs"]["maxConcurrentRuns"]
    defs = make_definitions(REPO_ROOT / "configs" / "cluster.yaml")
    print(f"pool `llm`: {limit} slots; at most {max_runs} runs; {args.queued} queued runs per job")
    print(
        f"{'job':<22} {'launched (op)':>14} {'waiting in pods':>16} {'launched (run)':>15} {'waiting':>8}"
    )
    with instance_for_test(overrides={"concurrency": {"pools": {"default_limit": limit}}}) as inst:
        inst.event_log_storage.set_concurrency_slots("llm", limit)
        for name in JOBS:
            info = run_op_concurrency(defs.resolve_job_def(name))
            runs = [
                DagsterRun(
                    job_name=name,
                    run_id=f"{name}-{k:04d}",
                    status=DagsterRunStatus.NOT_STARTED,
                    run_op_concurrency=info,
                )  # fmt: skip
                for k in range(args.queued)
            ]
            op = launched(inst, runs, "op", max_runs)
            run = launched(inst, runs, "run", max_runs)
            print(f"{name:<22} {op:>14} {max(op - limit, 0):>16} {run:>15} {max(run - limit, 0):>8}"
                  f"   (root ops in the pool: {dict(info.root_key_counts) if info else {}}, "
                  f"unconstrained roots: {info.has_unconstrained_root_nodes if info else None})")  # fmt: skip


if __name__ == "__main__":
    main()
