"""What a build costs in LLM calls, tokens and GPU-hours, before it runs.

Calls come from the config (tournament: domains × queries × rounds × pairs per round) and from
the annotation traversal (topic-scoring requests per problem: measured from a built
``topic_annotations`` when there is one, else ``cost.topic_calls_per_problem``). Prompt tokens
are the real prompts (the project's own request builders) on sampled corpus problems, counted as
characters / ``cost.chars_per_token``; answer tokens are the expected answer lengths. GPU time =
prompt tokens / prefill rate + answer tokens / decode rate, both per GPU and stated in the config:
they are assumptions to replace with your server's measured figures (vLLM's /metrics).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from saber_assets.config import PipelineConfig
from saber_resources.llm import LLMRequest
from saber_resources.prompts import (
    judge_request,
    paper_judge_request,
    problem_text,
    summary_request,
    topic_request,
)
from saber_resources.templates import load_templates

# The paper's own figure, for comparison (SABER-Math: Swiss tournament with an LLM judge).
PAPER = "≈1.5 M judge calls, 160 h on 4 H200 nodes"
TOPIC_LABELS = 8  # children scored per traversal request (MathWorld's median fan-out is close)


@dataclass
class StageCost:
    stage: str
    calls: float
    prompt_tokens: float
    answer_tokens: float

    def gpu_hours(self, prefill_per_s: float, decode_per_s: float) -> float:
        return (self.prompt_tokens / prefill_per_s + self.answer_tokens / decode_per_s) / 3600


def _chars(req: LLMRequest) -> int:
    return sum(len(content) for _, content in req.messages)


def tournament_calls(cfg: PipelineConfig, n_domains: int) -> int:
    """Swiss: every round pairs each query's candidates, ⌊3K/2⌋ judgments per query and round."""
    per_query = cfg.candidates.candidates_per_group * 3 // 2
    return n_domains * cfg.candidates.quota_per_domain * cfg.tournament.rounds * per_query


def build_cost(
    cfg: PipelineConfig,
    n_problems: int,
    sample: Sequence[tuple[str, str]],
    n_domains: int,
    topic_calls_per_problem: float | None = None,
) -> list[StageCost]:
    """Per stage (topics, summaries, tournament): calls, prompt and answer tokens. ``sample``:
    (problem, solution) pairs whose prompts stand for the corpus."""
    c = cfg.cost
    if not sample:
        raise ValueError("the cost model needs at least one sample problem")
    per_topic = topic_calls_per_problem if topic_calls_per_problem else c.topic_calls_per_problem
    labels = [f"Topic label number {k}" for k in range(TOPIC_LABELS)]
    mine = load_templates(cfg.prompt_paths())  # the prompts the build will send
    topic_chars = np.mean(
        [_chars(topic_request(problem_text(p, s), labels, mine.get("topics"))) for p, s in sample]
    )
    summary_chars = np.mean(
        [_chars(summary_request(p, s, mine.get("summaries"))) for p, s in sample]
    )
    texts = [problem_text(p, s) for p, s in sample]
    triples = [(texts[k], texts[(k + 1) % len(texts)], texts[(k + 2) % len(texts)])
               for k in range(len(texts))]  # fmt: skip
    paper = cfg.tournament.judge_prompt == "paper"
    judge_chars = np.mean(
        [
            _chars(
                paper_judge_request(q, a, b, cfg.tournament.judge_max_tokens, mine.get("judge"))
                if paper
                else judge_request(q, a, b, mine.get("judge"))
            )
            for q, a, b in triples
        ]
    )
    tok = c.chars_per_token
    topic_calls = n_problems * per_topic
    judge_calls = tournament_calls(cfg, n_domains)
    return [
        StageCost(
            "annotations: topics", topic_calls, topic_calls * topic_chars / tok,
            topic_calls * (8 + 12 * TOPIC_LABELS),
        ),
        StageCost(
            "annotations: summaries", n_problems, n_problems * summary_chars / tok,
            n_problems * c.summary_answer_tokens,
        ),
        StageCost(
            f"tournament ({cfg.tournament.judge_prompt} judge)", judge_calls,
            judge_calls * judge_chars / tok,
            judge_calls * (c.judge_reasoning_tokens if paper else 2),
        ),
    ]  # fmt: skip


def cost_table(stages: list[StageCost], cfg: PipelineConfig) -> pl.DataFrame:
    c = cfg.cost
    rows = [
        {
            "stage": s.stage,
            "calls": int(round(s.calls)),
            "prompt_Mtok": round(s.prompt_tokens / 1e6, 1),
            "answer_Mtok": round(s.answer_tokens / 1e6, 1),
            "gpu_hours": round(s.gpu_hours(c.prefill_tokens_per_s, c.decode_tokens_per_s), 1),
        }
        for s in stages
    ]
    total = {
        "stage": "total",
        "calls": sum(r["calls"] for r in rows),
        "prompt_Mtok": round(sum(r["prompt_Mtok"] for r in rows), 1),
        "answer_Mtok": round(sum(r["answer_Mtok"] for r in rows), 1),
        "gpu_hours": round(sum(r["gpu_hours"] for r in rows), 1),
    }
    return pl.DataFrame([*rows, total])


def model_len_needed(cfg: PipelineConfig, texts: Sequence[str]) -> tuple[int, dict]:
    """The context length a served judge needs: the longest judge prompt the corpus can make
    (the query and both candidates the three longest problem texts, an upper bound) plus the
    largest answer budget (the paper judge's ``judge_max_tokens``, doubled on its one retry of a
    cut-off answer unless ``tournament.cut_off`` reads it from its reasoning), in tokens at ``cost.chars_per_token``, rounded up to a multiple of 1,024."""
    if not texts:
        raise ValueError("no problem texts to size the model length from")
    longest = sorted(texts, key=len, reverse=True)[:3]
    while len(longest) < 3:
        longest.append(longest[0])
    q, a, b = longest
    t = cfg.tournament
    paper = t.judge_prompt == "paper"
    mine = load_templates(cfg.prompt_paths()).get("judge")
    req = (
        paper_judge_request(q, a, b, t.judge_max_tokens, mine)
        if paper
        else judge_request(q, a, b, mine)
    )
    prompt = int(np.ceil(_chars(req) / cfg.cost.chars_per_token))
    doubled = 2 if t.cut_off == "retry_doubled" else 1
    answer = doubled * t.judge_max_tokens if paper else 2 * 2
    need = int(np.ceil((prompt + answer) / 1024) * 1024)
    detail = {"prompt_tokens": prompt, "answer_tokens": answer, "chars_per_token": cfg.cost.chars_per_token}  # fmt: skip
    return need, detail


def rounds_plan(curve: pl.DataFrame, gpu_hours_per_round: float, extra: int = 5) -> pl.DataFrame:
    """What more Swiss rounds would buy, per setting: the measured resolution curve
    (``leaderboard/rounds_resolution.parquet``: separable pairs and mean joint-interval width
    per round count) extended by ``extra`` rounds at the gain per round of its last measured
    step — a straight-line guess the curve's own flattening bounds — beside the GPU-hours each
    extra round costs."""
    rows = []
    for (setting,), part in curve.sort("rounds").group_by("setting", maintain_order=True):
        last = part.row(part.height - 1, named=True)
        for r in part.iter_rows(named=True):
            rows.append({"setting": setting, "rounds": r["rounds"], "kind": "measured",
                         "separable_pairs": float(r["separable_joint"] or 0),
                         "mean_width_joint": r["mean_width_joint"], "extra_gpu_hours": 0.0})  # fmt: skip
        if part.height >= 2:
            prev = part.row(part.height - 2, named=True)
            step = last["rounds"] - prev["rounds"]
            d_sep = ((last["separable_joint"] or 0) - (prev["separable_joint"] or 0)) / step
            d_width = (last["mean_width_joint"] - prev["mean_width_joint"]) / step
        else:
            d_sep, d_width = 0.0, 0.0
        for e in range(1, extra + 1):
            rows.append({
                "setting": setting, "rounds": last["rounds"] + e, "kind": "projected",
                "separable_pairs": min(float(last["pairs"] or 0),
                                       (last["separable_joint"] or 0) + max(d_sep, 0.0) * e),
                "mean_width_joint": max(0.0, last["mean_width_joint"] + min(d_width, 0.0) * e),
                "extra_gpu_hours": gpu_hours_per_round * e,
            })  # fmt: skip
    return pl.DataFrame(rows)
