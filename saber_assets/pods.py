"""Pod sizing per job on Kubernetes: the `dagster-k8s/config` tag the K8sRunLauncher reads."""

from __future__ import annotations

import json

from saber_assets.config import PipelineConfig, PodSize
from saber_assets.signals.sizing import bounds_pod_memory_gib, shard_pod_memory_gib
from saber_assets.stages import STAGES, stage_of

K8S_TAG = "dagster-k8s/config"


def largest_shard_rows(cfg: PipelineConfig) -> int:
    """The last shard also takes every row past shards × rows_per_shard: size for it."""
    sig = cfg.signals
    return max(
        sig.rows_per_shard, cfg.pods.expected_problems - (sig.shards - 1) * sig.rows_per_shard
    )


def check_pod_jobs(cfg: PipelineConfig) -> None:
    """`pods.jobs` names jobs of the stage table; a misspelt or renamed one would size nothing."""
    unknown = sorted(set(cfg.pods.jobs) - {s.job for s in STAGES})
    if unknown:
        names = ", ".join(s.job for s in STAGES)
        raise ValueError(f"pods.jobs: no job {', '.join(unknown)}; the jobs: {names}")


def pod_size(job: str, cfg: PipelineConfig) -> PodSize:
    """The pod a job's runs get: the config's ``pods.jobs`` entry, else by its stage's ``pod``."""
    pods = cfg.pods
    if job in pods.jobs:
        return pods.jobs[job]
    kind = stage_of(job).pod
    if kind == "shard":
        sig = cfg.signals
        gib = shard_pod_memory_gib(
            pods.expected_problems,
            largest_shard_rows(cfg),
            stored_fraction=pods.stored_fraction,
            summaries_threads=sig.threads if sig.layout == "summaries" else None,
        )
        return PodSize(cpu=str(cfg.signals.threads), memory=f"{gib}Gi")
    if kind == "signal-pass":  # the first, storage-free pass over every pair
        sig = cfg.signals
        gib = bounds_pod_memory_gib(pods.expected_problems, sig.bound_bins, sig.threads)
        return PodSize(cpu=str(sig.threads), memory=f"{max(gib, 4)}Gi")
    if kind == "llm" and cfg.llm.judge_backend != "cpu":
        return pods.llm
    if kind == "runs":
        return pods.runs
    return pods.default


def orchestrator_tags() -> dict[str, str]:
    """The run pod's tag under the ``k8s_job`` executor: it launches a pod per step, so it needs
    the service-account token every other run pod goes without (deploy/helm/values.yaml)."""
    return {K8S_TAG: json.dumps({"pod_spec_config": {"automount_service_account_token": True}})}


def k8s_tags(job: str, cfg: PipelineConfig) -> dict[str, str]:
    """Requests = limits for memory (an OOM kill names the job), requests only for CPU."""
    size = pod_size(job, cfg)
    resources = {
        "requests": {"cpu": size.cpu, "memory": size.memory},
        "limits": {"memory": size.memory},
    }
    return {K8S_TAG: json.dumps({"container_config": {"resources": resources}})}
