"""A fake `vllm` module that records what the backend asks of it (no GPU needed)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass


@dataclass
class Logprob:
    logprob: float
    rank: int
    decoded_token: str


class _Completion:
    def __init__(self, text, logprobs=None, finish_reason="stop"):
        self.text = text
        self.logprobs = logprobs
        self.finish_reason = finish_reason


class _RequestOutput:
    def __init__(self, text, logprobs=None, finish_reason="stop"):
        self.outputs = [_Completion(text, logprobs, finish_reason)]


def install(monkeypatch, answer) -> dict:
    """Install the fake; ``answer(messages, params)`` returns (text, logprobs-list or None[,
    finish reason])."""
    record: dict = {"init": None, "chats": []}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class StructuredOutputsParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            record["init"] = kwargs

        def chat(self, messages, sampling_params, use_tqdm=True, chat_template_kwargs=None):
            record["chats"].append((messages, sampling_params))
            record.setdefault("template_kwargs", []).append(chat_template_kwargs)
            return [
                _RequestOutput(*answer(m, p))
                for m, p in zip(messages, sampling_params, strict=True)
            ]

    vllm = types.ModuleType("vllm")
    vllm.LLM = LLM
    vllm.SamplingParams = SamplingParams
    sp = types.ModuleType("vllm.sampling_params")
    sp.StructuredOutputsParams = StructuredOutputsParams
    sp.SamplingParams = SamplingParams
    vllm.sampling_params = sp
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sp)
    return record
