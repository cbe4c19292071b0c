"""The annotators and judges (LLM or CPU) an asset uses, from the configured resources."""

import polars as pl

from saber_assets.pipeline import PipelineResource
from saber_resources.cache import EmbeddingCache, LLMCache
from saber_resources.llm import LLMResource
from saber_resources.llm_tasks import decoding_by_task
from saber_resources.stores import StoresResource
from saber_resources.task_set import TaskSet, make_tasks
from saber_resources.templates import load_templates


def tasks_for(
    llm: LLMResource,
    stores: StoresResource,
    max_retries: int = 2,
    judge_prompt: str = "paper",
    judge_max_tokens: int = 4096,
    judge_template: bool = True,
    judge_boxed: str = "last",
    judge_cut_off: str = "retry_doubled",
    summary_word_cap: bool = True,
    answer_format: str = "strict",
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
        decoding=decoding_by_task(llm.temperature, llm.reasoning_effort, llm.system_prompt),
        judge_boxed=judge_boxed,
        judge_cut_off=judge_cut_off,
        summary_word_cap=summary_word_cap,
        answer_format=answer_format,
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


def prepared_judge(
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    query_candidates: pl.DataFrame | None = None,
):
    """The configured pair judge and the text it reads per problem id (the CPU judge also gets
    the pipeline's topic and summary signals of each query–candidate pair, where given)."""
    tasks, text = prepared_tasks(pipeline, llm, stores, corpus, query_candidates)
    return tasks.pair_judge, text


def prepared_tasks(
    pipeline: PipelineResource,
    llm: LLMResource,
    stores: StoresResource,
    corpus: pl.DataFrame,
    query_candidates: pl.DataFrame | None = None,
):
    """``prepared_judge`` for every judge of the task set (pair, ordinal): (tasks, text)."""
    tcfg = pipeline.load().tournament
    tasks = tasks_for(
        llm, stores, tcfg.max_parse_retries, tcfg.judge_prompt, tcfg.judge_max_tokens,
        judge_boxed=tcfg.boxed_answer, judge_cut_off=tcfg.cut_off,
    )  # fmt: skip
    judge = tasks.pair_judge
    text = {
        r[0]: judge.text_for(r[1], r[2])
        for r in corpus.select("id", "problem", "solution").iter_rows()
    }
    if query_candidates is not None and hasattr(judge, "evidence"):
        # the CPU judge weighs the pipeline's own signals in
        for qid, cid, t, u in query_candidates.select(
            "query_id", "candidate_id", "topic", "summary"
        ).iter_rows():
            judge.evidence[(text[qid], text[cid])] = (t, u)
    return tasks, text
