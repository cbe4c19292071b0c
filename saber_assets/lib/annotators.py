"""Build the task set (LLM or CPU) for an asset from the configured resources."""

from saber_resources.annotator_set import TaskSet, make_tasks
from saber_resources.cache import EmbeddingCache, LLMCache
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource
from saber_resources.templates import load_templates


def tasks_for(
    llm: LLMResource,
    stores: StoresResource,
    max_retries: int = 2,
    judge_prompt: str = "paper",
    judge_max_tokens: int = 4096,
    judge_template: bool = True,
) -> TaskSet:
    """``judge_template`` False: the judge keeps its built-in text even where ``prompts.judge``
    replaces it (a second judge asked with the other prompt style)."""
    templates = load_templates(llm.prompts)
    if not judge_template:
        templates.pop("judge", None)
    return make_tasks(
        llm.make_backend(),
        LLMCache(stores.db()),
        EmbeddingCache(stores.db()),
        max_retries,
        judge_prompt,
        judge_max_tokens,
        synthetic=llm.backend == "synthetic",
        thinking=thinking_by_task(llm, judge_prompt),
        templates=templates,
        max_tokens=dict(llm.max_tokens),
    )


def thinking_by_task(llm: LLMResource, judge_prompt: str) -> dict[str, bool]:
    """Task -> thinking on/off, where the backend can switch it (``llm.thinking_switch``): the
    configured ones, and the judge's from its prompt unless configured (the paper prompt asks
    for reasoning, the direct one for the digit at once)."""
    if llm.thinking_switch == "none":
        return {}
    out = {task: value == "on" for task, value in llm.thinking.items()}
    out.setdefault("judge", judge_prompt == "paper")
    out.setdefault("pointwise", False)  # P(yes) is read off the first token: no thinking first
    return out
