"""The robustness check's second judge: which one `robustness.judge` asks for (another order,
another prompt, another model, or the CPU judge without the pipeline's signals)."""

from __future__ import annotations

from saber_assets.lib.tasks import tasks_for
from saber_assets.pipeline import PipelineResource
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource


def second_judge(pipeline: PipelineResource, llm: LLMResource, stores: StoresResource, tasks):
    """(the robustness check's second judge, whether it sees the other order, a label)."""
    cfg = pipeline.load()
    jc = cfg.robustness.judge
    variant = jc.variant
    if variant == "auto":
        variant = "no-signals" if llm.backend in ("cpu", "synthetic") else "other-order"
    first = tasks.pair_judge
    if variant == "no-signals":
        from saber_resources.cpu_tasks import CPUPairJudge

        if not isinstance(first, CPUPairJudge):
            raise ValueError("robustness.judge.variant no-signals needs the CPU judge backend")
        we, wk, _, _ = first.scorer.weights
        judge = CPUPairJudge(first.embedder, weights=(we, wk, 0.0, 0.0))
        return judge, False, f"CPU evidence without the topic and summary terms ({judge.formula})"
    if variant == "other-order":
        return first, True, f"{first.backend}:{first.model}, the other candidate shown first"
    tcfg = cfg.tournament
    if variant == "other-model":
        if not jc.model:
            raise ValueError("robustness.judge.variant other-model needs robustness.judge.model")
        other = LLMResource(**{**{k: getattr(llm, k) for k in LLMResource.model_fields},
                               "model": jc.model})  # fmt: skip
        t2 = tasks_for(other, stores, tcfg.max_parse_retries, tcfg.judge_prompt,
                       tcfg.judge_max_tokens, judge_cut_off=tcfg.cut_off)  # fmt: skip
        return t2.pair_judge, False, f"{other.backend}:{jc.model}"
    prompt = jc.prompt or ("direct" if tcfg.judge_prompt == "paper" else "paper")
    t2 = tasks_for(llm, stores, tcfg.max_parse_retries, prompt, tcfg.judge_max_tokens,
                   judge_template=prompt == tcfg.judge_prompt,
                   judge_cut_off=tcfg.cut_off)  # fmt: skip
    return t2.pair_judge, False, f"{first.backend}:{first.model}, the {prompt!r} judge prompt"
