"""Build the task set (LLM or CPU) for an asset from the configured resources."""

from saber_resources.cache import EmbeddingCache, LLMCache
from saber_resources.llm import LLMResource
from saber_resources.stores import StoresResource
from saber_resources.taskset import TaskSet, make_tasks


def tasks_for(
    llm: LLMResource,
    stores: StoresResource,
    max_retries: int = 2,
    judge_prompt: str = "paper",
    judge_max_tokens: int = 4096,
) -> TaskSet:
    return make_tasks(
        llm.make_backend(),
        LLMCache(stores.db()),
        EmbeddingCache(stores.db()),
        max_retries,
        judge_prompt,
        judge_max_tokens,
        synthetic=llm.backend == "synthetic",
    )
