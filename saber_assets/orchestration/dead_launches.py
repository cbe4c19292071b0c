"""Runs of `saber build` whose process died (SIGKILL, OOM, a closed laptop).

Such a run stays STARTED in the instance and keeps its concurrency-pool slots, so the next build
would wait for the `llm` pool forever. Every in-process build run carries its host and pid as
tags; a later build marks the dead ones failed and frees their slots. Runs on a deployment are
the daemon's (``run_monitoring`` in dagster.yaml), not ours.
"""

from __future__ import annotations

import os
import socket

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

HOST_TAG, PID_TAG = "saber/host", "saber/pid"
ALIVE = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]


def process_tags() -> dict[str, str]:
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def reap_dead_launches(instance: DagsterInstance) -> list[str]:
    """Mark this host's build runs whose process is gone as failed and free their pool slots;
    returns their run ids."""
    host = socket.gethostname()
    runs = instance.get_runs(RunsFilter(statuses=ALIVE, tags={HOST_TAG: host}))
    reaped = []
    for run in runs:
        pid = int(run.tags.get(PID_TAG, "0"))
        if pid == os.getpid() or _alive(pid):
            continue
        instance.report_run_failed(
            run, f"saber build process {pid} on {host} died before the run ended (killed?)"
        )
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        reaped.append(run.run_id)
    return reaped
