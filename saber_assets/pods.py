"""Pod sizing per job on Kubernetes: the `dagster-k8s/config` tag the K8sRunLauncher reads."""

from __future__ import annotations

import json
from collections.abc import Callable

from saber_assets.config import PipelineConfig, PodSize
from saber_assets.declarations import stage_declarations
from saber_assets.lib.pod_sizes import default_pod
from saber_assets.signals.sizing import largest_shard_rows  # noqa: F401 (the tests' import)
from saber_assets.stages import STAGES, stage_of_asset

K8S_TAG = "dagster-k8s/config"


def check_pod_jobs(cfg: PipelineConfig) -> None:
    """`pods.jobs` names jobs of the stage table; a misspelt or renamed one would size nothing."""
    unknown = sorted(set(cfg.pods.jobs) - {s.job for s in STAGES})
    if unknown:
        names = ", ".join(s.job for s in STAGES)
        raise ValueError(f"pods.jobs: no job {', '.join(unknown)}; the jobs: {names}")


def pod_size(job: str, cfg: PipelineConfig) -> PodSize:
    """The pod a job's runs get: the config's ``pods.jobs`` entry, else the pod its assets
    declare (``pod=`` on their decorators; the default pod where none does)."""
    if job in cfg.pods.jobs:
        return cfg.pods.jobs[job]
    return job_pods().get(job, default_pod)(cfg)


def job_pods() -> dict[str, Callable[[PipelineConfig], PodSize]]:
    """Job -> the pod sizer its assets declare; two different sizers in one job are an error
    (one run, one pod)."""
    out: dict[str, Callable[[PipelineConfig], PodSize]] = {}
    for d in stage_declarations():
        if d.is_check or d.pod is None:
            continue
        job = stage_of_asset(d.asset_name).job
        if out.get(job, d.pod) is not d.pod:
            raise ValueError(f"{job}: its assets declare two pods ({out[job].__name__}, "
                             f"{d.pod.__name__}); one run has one pod")  # fmt: skip
        out[job] = d.pod
    return out


def orchestrator_tags() -> dict[str, str]:
    """The run pod's tag under the ``k8s_job`` executor: it launches a pod per step, so it needs
    the service-account token every other run pod goes without (deploy/helm/values.yaml)."""
    return {
        K8S_TAG: json.dumps({
            "pod_spec_config": {"automount_service_account_token": True},
            # the one run pod the network policy lets reach the Kubernetes API
            # (deploy/k8s/network-policy.yaml: step-launcher-api-egress)
            "pod_template_spec_metadata": {"labels": {"saber/launches": "steps"}},
        })
    }  # fmt: skip


def k8s_tags(job: str, cfg: PipelineConfig) -> dict[str, str]:
    """Requests = limits for memory (an OOM kill names the job), requests only for CPU."""
    size = pod_size(job, cfg)
    resources = {
        "requests": {"cpu": size.cpu, "memory": size.memory},
        "limits": {"memory": size.memory},
    }
    return {K8S_TAG: json.dumps({"container_config": {"resources": resources}})}
