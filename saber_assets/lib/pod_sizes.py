"""Pod sizes a stage asset declares (``pod=`` on its decorator): each a function of the config
to the pod its job's runs get on Kubernetes (``pods.pod_size``). The signal passes size theirs
from the corpus (``signals.sizing``)."""

from __future__ import annotations

from saber_assets.config import PipelineConfig, PodSize


def default_pod(cfg: PipelineConfig) -> PodSize:
    """What a job gets when none of its assets asks for more (``pods.default``)."""
    return cfg.pods.default


def llm_pod(cfg: PipelineConfig) -> PodSize:
    """A job whose steps wait on the served model (annotation chunks, tournaments): the LLM pod,
    except on the CPU backend, where the work is the default pod's."""
    return cfg.pods.llm if cfg.llm.judge_backend != "cpu" else cfg.pods.default


def runs_pod(cfg: PipelineConfig) -> PodSize:
    """A retriever's runs on one domain (``pods.runs``)."""
    return cfg.pods.runs
