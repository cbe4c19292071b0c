"""Pick the task implementations for the configured LLM backend: the only place that decides."""

from __future__ import annotations

from dataclasses import dataclass

from saber_resources.cache import EmbeddingCache, LLMCache
from saber_resources.cpu_tasks import (
    CPUOrdinalJudge,
    CPUPairJudge,
    CPUPointwiseJudge,
    CPUSummarizer,
    CPUTopicScorer,
    CPUTranslator,
)
from saber_resources.embeddings import CachedEmbedder, MiniLMOnnxEmbedder
from saber_resources.llm import LLMBackend
from saber_resources.llm_tasks import (
    Decoding,
    LLMOrdinalJudge,
    LLMPairJudge,
    LLMPointwiseJudge,
    LLMSegmenter,
    LLMSummarizer,
    LLMTopicScorer,
    LLMTranslator,
    OrdinalJudge,
    PairJudge,
    PointwiseJudge,
    Summarizer,
    TaskRunner,
    TopicScorer,
)
from saber_resources.synthetic_tasks import SyntheticSummarizer, SyntheticTopicScorer
from saber_resources.templates import PromptTemplate


@dataclass
class TaskSet:
    topic_scorer: TopicScorer
    summarizer: Summarizer
    pair_judge: PairJudge
    pointwise_judge: PointwiseJudge
    backend: str
    translator: object = None
    ordinal_judge: OrdinalJudge | None = None
    segmenter: LLMSegmenter | None = None  # LLM backends only: no CPU stand-in splits prose


_CPU_EMBEDDER: MiniLMOnnxEmbedder | None = None


def cpu_embedder() -> MiniLMOnnxEmbedder:
    """One ONNX session per process (loading it costs ~0.3 s and 25 MB)."""
    global _CPU_EMBEDDER
    if _CPU_EMBEDDER is None:
        _CPU_EMBEDDER = MiniLMOnnxEmbedder()
    return _CPU_EMBEDDER


def make_tasks(
    backend: LLMBackend | None,
    llm_cache: LLMCache | None,
    embedding_cache: EmbeddingCache | None,
    max_retries: int = 2,
    judge_prompt: str = "paper",
    judge_max_tokens: int = 4096,
    synthetic: bool = False,
    thinking: dict[str, bool] | None = None,
    templates: dict[str, PromptTemplate] | None = None,
    max_tokens: dict[str, int] | None = None,
    decoding: dict[str, Decoding] | None = None,
    judge_boxed: str = "last",
    judge_cut_off: str = "retry_doubled",
    summary_word_cap: bool = True,
    answer_format: str = "strict",
) -> TaskSet:
    """LLM tasks over ``backend`` (sharing one runner, so stats add up), or the CPU tasks if None
    (``synthetic``: hash-drawn topics and summaries, the CPU judges).
    ``judge_prompt`` / ``judge_max_tokens`` choose the LLM pair judge (``paper`` or ``direct``);
    ``templates`` (task -> template) replace built-in prompts, ``max_tokens`` (task -> tokens)
    the default budgets; ``answer_format`` how the topic and summary answers are read
    (``strict`` or ``reference``). The CPU tasks ask no model: none of these applies to them."""
    if backend is None:
        emb = CachedEmbedder(cpu_embedder(), embedding_cache)
        pair = CPUPairJudge(emb)
        return TaskSet(
            SyntheticTopicScorer() if synthetic else CPUTopicScorer(emb),
            SyntheticSummarizer() if synthetic else CPUSummarizer(),
            pair,
            CPUPointwiseJudge(emb),
            "synthetic" if synthetic else "cpu",
            CPUTranslator(),
            CPUOrdinalJudge(emb, pair.scorer),
        )
    runner = TaskRunner(
        backend,
        llm_cache,
        max_retries=max_retries,
        thinking=dict(thinking or {}),
        decoding=dict(decoding or {}),
    )
    t, budget = templates or {}, max_tokens or {}

    def task(cls, name: str):
        return cls(runner, t.get(name), budget.get(name))

    return TaskSet(
        LLMTopicScorer(runner, t.get("topics"), budget.get("topics"), answer_format),
        LLMSummarizer(
            runner, t.get("summaries"), budget.get("summaries"), summary_word_cap, answer_format
        ),
        LLMPairJudge(
            runner, judge_prompt, judge_max_tokens, t.get("judge"), judge_boxed, judge_cut_off
        ),
        task(LLMPointwiseJudge, "pointwise"),
        backend.name,
        task(LLMTranslator, "translate"),
        task(LLMOrdinalJudge, "ordinal"),
        task(LLMSegmenter, "math_split"),
    )
