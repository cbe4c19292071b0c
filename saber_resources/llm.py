"""LLM backends with one batched interface: ``generate(requests) -> responses``.

- ``vllm``: in-process ``vllm.LLM`` (GPU; the ``gpu`` extra, imported lazily), batched chat,
  structured JSON / choice output, prefix caching.
- ``openai``: any OpenAI-compatible server (``vllm serve``, llama.cpp's server, hosted APIs), async
  with bounded concurrency and retries with exponential backoff on 429/5xx/timeouts/bad bodies.
- ``cpu``: no LLM at all; the task layer (``saber_resources.llm_tasks``) uses deterministic CPU
  implementations instead.

The task layer (prompts, strict parsers, cache) sits on top; this module only moves requests.
"""

import asyncio
import json
import math
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Literal, Protocol

import httpx
from dagster import ConfigurableResource
from pydantic import Field

from saber_resources.cache import content_hash


class LLMServerError(RuntimeError):
    """The server could not be reached or kept failing; the message names the URL."""


class RequestRefused(LLMServerError):
    """The server answered 4xx to this one request; ``status`` and the server's ``reason``."""

    def __init__(self, message: str, status: int, reason: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


@dataclass(frozen=True)
class LLMRequest:
    messages: tuple[tuple[str, str], ...]  # (role, content)
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int = 0
    json_schema: dict | None = None
    choices: tuple[str, ...] | None = None
    top_logprobs: int = 0  # >0: return the alternatives of the first generated token
    all_logprobs: bool = False  # also every generated token's alternatives (top_logprobs of them)
    # a reasoning model's thinking switched on or off for this request; None: the model's default
    thinking: bool | None = None
    # a reasoning model's effort ("low", "medium", "high"; GPT-OSS); None: the model's default
    reasoning_effort: str | None = None

    def to_json(self) -> dict:
        d = asdict(self)
        for key in ("thinking", "reasoning_effort"):
            if d[key] is None:  # requests without the field keep their cache keys
                del d[key]
        return d

    def hash(self) -> str:
        return content_hash(self.to_json())

    def chat(self) -> list[dict]:
        return [{"role": r, "content": c} for r, c in self.messages]


@dataclass
class LLMResponse:
    text: str
    top_logprobs: dict[str, float] | None = None  # first generated token: token -> logprob
    finish_reason: str | None = None  # "length": cut off at max_tokens; NO_CONTENT: no answer
    # every generated token with its alternatives, when the request asked for all_logprobs
    token_logprobs: list | None = None
    # the server's own count (``usage``), where it gives one; None for cached answers
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # a reasoning model's thinking, where the server returns it apart (``reasoning_content`` or
    # ``reasoning``); kept only for an answer cut off at its budget (``CUT_OFF``), the one place
    # a reader may look in it
    reasoning: str | None = None


@dataclass
class TransportStats:
    """What moving requests cost, for an asset's metadata: HTTP requests (retries included),
    retries by cause, the server's token counts, seconds inside ``generate``, and the most
    requests that were in flight at once."""

    requests: int = 0
    retries: Counter = field(default_factory=Counter)
    # seconds lost to faults: failed attempts and the waits before their retries (summed over
    # requests: concurrent losses add up)
    lost_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0

    def sent(self) -> None:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def done(self) -> None:
        self.in_flight -= 1


# finish reason of a request the server refused for what it holds (HTTP 400/413/422: a prompt
# over the context, a schema it cannot compile); the answer's text is the server's reason. The
# task runner records the item as failed and goes on: one long problem never stops a chunk.
REFUSED = "refused"
REFUSED_STATUS = {400, 413, 422}

# finish reason of an answer whose content was null (a reasoning model that spent its budget
# thinking, the reasoning parser keeping it all): the task runner retries it with a larger budget
NO_CONTENT = "no_content"
# finish reasons of an answer cut off before it ended
CUT_OFF = ("length", NO_CONTENT)

THINKING_SWITCHES = ("none", "chat_template_kwargs")

# How an OpenAI-compatible server takes constrained output (README "LLM servers"):
# - ``vllm``: ``structured_outputs`` ({json: schema} / {choice: [...]}) — vLLM ≥ 0.10's fields;
# - ``llama.cpp``: ``response_format`` json_schema for JSON, a GBNF ``grammar`` for choices;
# - ``openai``: ``response_format`` json_schema only (hosted APIs refuse unknown fields), choices
#   by the prompt alone;
# - ``auto``: asked once of ``GET /models`` (each server names itself in ``owned_by``).
SERVERS = ("auto", "openai", "vllm", "llama.cpp")


def choice_grammar(choices: tuple[str, ...]) -> str:
    """A GBNF grammar (llama.cpp's ``grammar`` field) whose only sentences are ``choices``."""
    return "root ::= " + " | ".join(json.dumps(c) for c in choices)


def server_of_models(data: dict) -> str:
    """The server flavour a ``GET /models`` answer names: llama.cpp's cards say ``owned_by:
    llamacpp`` (and it adds a top-level ``models`` list), vLLM's ``owned_by: vllm``; anything
    else is a generic OpenAI-compatible API."""
    cards = data.get("data") or []
    owners = {str(c.get("owned_by", "")).lower() for c in cards if isinstance(c, dict)}
    if "llamacpp" in owners or "models" in data:
        return "llama.cpp"
    if "vllm" in owners:
        return "vllm"
    return "openai"


def thinking_fields(switch: str, thinking: bool | None) -> dict:
    """The request fields that carry a thinking switch, per model family: Qwen3-style chat
    templates read ``chat_template_kwargs: {enable_thinking: ...}``; ``none`` sends nothing (a
    model without the switch)."""
    if thinking is None or switch == "none":
        return {}
    if switch == "chat_template_kwargs":
        return {"chat_template_kwargs": {"enable_thinking": bool(thinking)}}
    raise ValueError(f"unknown thinking switch {switch!r} (one of {', '.join(THINKING_SWITCHES)})")


def with_effort(fields: dict, effort: str | None) -> dict:
    """``fields`` (a request's or a ``chat`` call's) with a reasoning effort as a chat-template
    kwarg, where GPT-OSS templates read it (llama.cpp, the in-process engine); unchanged for
    None."""
    if effort is not None:
        fields.setdefault("chat_template_kwargs", {})["reasoning_effort"] = effort
    return fields


class LLMBackend(Protocol):
    name: str
    model: str

    def generate(self, requests: list[LLMRequest]) -> list[LLMResponse]: ...


# --------------------------------------------------------------------------------------- vLLM


@dataclass
class VLLMBackend:
    model: str
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = 8192
    seed: int = 0
    # how a request's thinking switch reaches the chat template ("none": the model has none)
    thinking_switch: str = "none"
    name: str = "vllm"
    _llm: object = field(default=None, repr=False)

    def _engine(self):
        if self._llm is None:
            try:
                import vllm
            except ImportError as exc:  # pragma: no cover - depends on the GPU image
                raise ImportError(
                    "the vllm backend needs vLLM: install it (uv pip install -r deploy/gpu/requirements-vllm.txt, README 'GPU extra')"
                ) from exc
            self._llm = vllm.LLM(
                model=self.model,
                tensor_parallel_size=self.tensor_parallel_size,
                gpu_memory_utilization=self.gpu_memory_utilization,
                max_model_len=self.max_model_len,
                enable_prefix_caching=True,  # every request of a task shares its long system prompt
                seed=self.seed,
            )
        return self._llm

    def sampling_params(self, req: LLMRequest):
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        structured = None
        if req.json_schema is not None:
            structured = StructuredOutputsParams(json=req.json_schema)
        elif req.choices:
            structured = StructuredOutputsParams(choice=list(req.choices))
        return SamplingParams(
            temperature=req.temperature,
            max_tokens=req.max_tokens,
            seed=req.seed,
            logprobs=(max(req.top_logprobs, 5) if req.all_logprobs else req.top_logprobs) or None,
            structured_outputs=structured,
        )

    def generate(self, requests: list[LLMRequest]) -> list[LLMResponse]:
        if not requests:
            return []
        llm = self._engine()
        outputs: list = [None] * len(requests)
        # one chat call per thinking switch: vLLM takes the template's kwargs per call
        groups: dict = {}
        for k, r in enumerate(requests):
            groups.setdefault((r.thinking, r.reasoning_effort), []).append(k)
        for (thinking, effort), idx in groups.items():
            fields = with_effort(thinking_fields(self.thinking_switch, thinking), effort)
            got = llm.chat(
                [requests[k].chat() for k in idx],
                [self.sampling_params(requests[k]) for k in idx],
                use_tqdm=False,
                **fields,
            )
            for k, out in zip(idx, got, strict=True):
                outputs[k] = out
        responses = []
        for req, out in zip(requests, outputs, strict=True):
            comp = out.outputs[0]
            top, tokens = None, None
            if (req.top_logprobs or req.all_logprobs) and comp.logprobs:
                per_position = [
                    {lp.decoded_token: lp.logprob for lp in pos.values()} for pos in comp.logprobs
                ]
                top = per_position[0] if req.top_logprobs else None
                if req.all_logprobs:
                    ids = getattr(comp, "token_ids", None) or []
                    tokens = [
                        [pos[tid].decoded_token if tid in pos else "", alts]
                        for tid, pos, alts in zip(ids, comp.logprobs, per_position, strict=False)
                    ] or [[max(a, key=a.get), a] for a in per_position]
            responses.append(
                LLMResponse(comp.text, top, getattr(comp, "finish_reason", None), tokens)
            )
        return responses


# ----------------------------------------------------------------------- OpenAI-compatible

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


def retry_after(resp: httpx.Response, cap_s: float = 60.0) -> float:
    """The wait a 429 / 503 asks for in ``Retry-After`` (seconds; an HTTP date is not honoured),
    at most ``cap_s``; 0 when it asks none."""
    try:
        return min(max(float(resp.headers.get("retry-after", 0)), 0.0), cap_s)
    except ValueError:
        return 0.0


async def post_with_retries(
    client: httpx.AsyncClient,
    sem: asyncio.Semaphore,
    url: str,
    body: dict,
    parse,
    max_retries: int,
    backoff_s: float,
    timeout_s: float,
    on_attempt=None,
    stats: TransportStats | None = None,
):
    """POST ``body`` and ``parse`` the JSON answer, retrying with jittered exponential backoff on
    timeouts, connection errors, 408/409/429/5xx and malformed bodies (waiting at least what a
    ``Retry-After`` asks); a 4xx is final. Any failure
    that survives the retries raises ``LLMServerError`` naming the URL and the last error.
    ``stats`` counts the requests, the ones in flight and each retry's cause."""
    stats = stats if stats is not None else TransportStats()
    last, cause, asked_wait, t_attempt = "", "", 0.0, 0.0
    for attempt in range(max_retries + 1):
        if attempt:
            stats.retries[cause] += 1
            stats.lost_s += time.perf_counter() - t_attempt
            backoff = backoff_s * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
            await asyncio.sleep(max(backoff, asked_wait))
            stats.lost_s += max(backoff, asked_wait)
            asked_wait = 0.0
        t_attempt = time.perf_counter()
        async with sem:
            if on_attempt:
                on_attempt()
            stats.sent()
            try:
                resp = await client.post(url, json=body)
            except httpx.TimeoutException:
                last, cause = f"timed out after {timeout_s:g}s", "timeout"
                continue
            except httpx.TransportError as exc:
                last, cause = f"cannot connect ({type(exc).__name__}: {exc})", "connection"
                continue
            finally:
                stats.done()
        if resp.status_code in RETRY_STATUS:
            last, cause = f"HTTP {resp.status_code}: {resp.text[:200]}", f"http_{resp.status_code}"
            asked_wait = retry_after(resp)
            continue
        if resp.status_code >= 400:
            raise RequestRefused(
                f"{url} refused the request: HTTP {resp.status_code}: {resp.text[:300]}",
                resp.status_code,
                resp.text[:500],
            )
        try:
            return parse(resp.json())
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            last = f"malformed response body ({exc}): {resp.text[:200]}"
            cause = "malformed_body"
            continue
    raise LLMServerError(f"{url}: giving up after {max_retries + 1} attempts; last error: {last}")


@dataclass
class OpenAIBackend:
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)  # never in a log or a traceback
    max_concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 120.0
    backoff_s: float = 1.0
    json_mode: Literal["json_schema", "structured_outputs", "none"] = "json_schema"
    thinking_switch: str = "none"
    # how constrained output is sent (``SERVERS``); "auto" asks the server once, at first use
    server: str = "openai"
    name: str = "openai"
    calls: int = 0  # HTTP requests sent, retries included (tests count these)
    transport: TransportStats = field(default_factory=TransportStats)
    server_probe: str | None = None  # what the "auto" probe saw (for metadata and errors)

    def __post_init__(self) -> None:
        if self.server not in SERVERS:
            raise ValueError(f"unknown server {self.server!r} (one of {', '.join(SERVERS)})")

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def resolve_server(self) -> str:
        """The server flavour: as configured, or (``auto``) from the server's ``GET /models``,
        asked once; a server that does not answer it is taken for a generic OpenAI API."""
        if self.server != "auto":
            return self.server
        url = self.base_url.rstrip("/") + "/models"
        try:
            resp = httpx.get(url, headers=self._headers(), timeout=min(self.timeout_s, 10.0))
            resp.raise_for_status()
            self.server = server_of_models(resp.json())
            self.server_probe = f"GET {url}: {self.server}"
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            self.server = "openai"
            self.server_probe = f"GET {url} failed ({type(exc).__name__}); generic openai"
        return self.server

    def body(self, req: LLMRequest) -> dict:
        server = self.server if self.server != "auto" else "openai"
        body: dict = {
            "model": self.model,
            "messages": req.chat(),
            "max_tokens": req.max_tokens,
            "temperature": req.temperature,
            "seed": req.seed,
        }
        structured = self.json_mode == "structured_outputs" or (
            server == "vllm" and self.json_mode != "none"
        )
        if req.json_schema is not None and structured:
            body["structured_outputs"] = {"json": req.json_schema}
        elif req.json_schema is not None and self.json_mode != "none":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": req.json_schema, "strict": True},
            }
        if req.choices and structured:
            body["structured_outputs"] = {"choice": list(req.choices)}
        elif req.choices and server == "llama.cpp" and self.json_mode != "none":
            body["grammar"] = choice_grammar(req.choices)
        if req.top_logprobs or req.all_logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = max(req.top_logprobs, 5 if req.all_logprobs else 0)
        body.update(thinking_fields(self.thinking_switch, req.thinking))
        if server == "llama.cpp":
            with_effort(body, req.reasoning_effort)
        elif req.reasoning_effort is not None:  # the OpenAI API's field, which vLLM's server takes
            body["reasoning_effort"] = req.reasoning_effort
        return body

    @staticmethod
    def parse_body(data: dict) -> LLMResponse:
        choice = data["choices"][0]
        message = choice["message"]
        text = message["content"]
        # vLLM and llama.cpp return a reasoning model's thinking apart, under one of two names
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, str):
            raise ValueError("message.reasoning_content is not a string")
        if text is None:
            return LLMResponse("", None, NO_CONTENT, None, reasoning=reasoning)
        if not isinstance(text, str):
            raise ValueError("message.content is not a string")
        top, tokens = None, None
        lp = choice.get("logprobs")
        if lp and lp.get("content"):
            tokens = []
            for pos in lp["content"]:
                alts = {alt["token"]: alt["logprob"] for alt in pos.get("top_logprobs", [])}
                alts.setdefault(pos["token"], pos["logprob"])
                tokens.append([pos["token"], alts])
            top = tokens[0][1]
        usage = data.get("usage") or {}
        return LLMResponse(
            text,
            top,
            choice.get("finish_reason"),
            tokens,
            usage.get("prompt_tokens"),
            usage.get("completion_tokens"),
            reasoning if choice.get("finish_reason") in CUT_OFF else None,
        )

    async def _one(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, req: LLMRequest
    ) -> LLMResponse:
        def count() -> None:
            self.calls += 1

        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            resp = await post_with_retries(
                client,
                sem,
                url,
                self.body(req),
                self.parse_body,
                self.max_retries,
                self.backoff_s,
                self.timeout_s,
                count,
                self.transport,
            )
        except RequestRefused as exc:
            if exc.status not in REFUSED_STATUS:  # 401/403/404: the key, the URL, the model
                raise
            return LLMResponse(f"HTTP {exc.status}: {exc.reason}", None, REFUSED)
        self.transport.prompt_tokens += resp.prompt_tokens or 0
        self.transport.completion_tokens += resp.completion_tokens or 0
        return resp

    async def _all(self, requests: list[LLMRequest]) -> list[LLMResponse]:
        sem = asyncio.Semaphore(self.max_concurrency)
        # one connection per request in flight: no request waits for a socket
        limits = httpx.Limits(
            max_connections=self.max_concurrency, max_keepalive_connections=self.max_concurrency
        )
        async with httpx.AsyncClient(
            timeout=self.timeout_s, headers=self._headers(), limits=limits
        ) as client:
            return list(await asyncio.gather(*(self._one(client, sem, r) for r in requests)))

    def generate(self, requests: list[LLMRequest]) -> list[LLMResponse]:
        if not requests:
            return []
        self.resolve_server()
        t0 = time.perf_counter()
        try:
            return asyncio.run(self._all(requests))
        finally:
            self.transport.seconds += time.perf_counter() - t0


def p_yes(top_logprobs: dict[str, float] | None) -> float:
    """P("Yes") from the first token's alternatives, renormalised over Yes/No.

    Tokens are compared after stripping spaces and case ("Yes", " yes", "YES"). Raises ValueError
    when neither answer is among the alternatives.
    """
    if not top_logprobs:
        raise ValueError("no logprobs returned")
    yes = no = -math.inf
    for tok, lp in top_logprobs.items():
        t = tok.strip().lower()
        if t == "yes":
            yes = max(yes, lp)
        elif t == "no":
            no = max(no, lp)
    if yes == -math.inf and no == -math.inf:
        raise ValueError(f"neither Yes nor No among the top tokens {sorted(top_logprobs)[:10]}")
    m = max(yes, no)
    ey, en = math.exp(yes - m), math.exp(no - m)
    return ey / (ey + en)


# ------------------------------------------------------------------------ Dagster resource


class LLMResource(ConfigurableResource):
    """Selects the LLM backend by config alone. The API key comes from the environment (EnvVar)."""

    backend: Literal["cpu", "vllm", "openai", "synthetic"] = "cpu"
    model: str = "cpu"
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str | None = Field(default=None, description="Set with dagster.EnvVar; never logged")
    max_concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 120.0
    backoff_s: float = 1.0
    json_mode: Literal["json_schema", "structured_outputs", "none"] = "json_schema"
    # how the server takes constrained output: auto (asked of GET /models), openai, vllm, llama.cpp
    server: Literal["auto", "openai", "vllm", "llama.cpp"] = "auto"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None  # the model's own
    seed: int = 0
    # per task ("topics", "summaries", "judge", "ordinal", "pointwise", "math_split",
    # "translate"): "on" / "off" switches a reasoning model's thinking; absent: its default
    thinking: dict[str, str] = Field(default_factory=dict)
    thinking_switch: str = "none"
    # per task: output budget in tokens (absent: the task's default)
    max_tokens: dict[str, int] = Field(default_factory=dict)
    # per task: sampling temperature (absent: 0), reasoning effort (absent: the model's
    # default) and the system line in place of the template's (absent: the template's)
    temperature: dict[str, float] = Field(default_factory=dict)
    reasoning_effort: dict[str, str] = Field(default_factory=dict)
    system_prompt: dict[str, str] = Field(default_factory=dict)
    # per task: a template file replacing the built-in prompt (``prompts:`` in the config)
    prompts: dict[str, str] = Field(default_factory=dict)

    def make_backend(self) -> LLMBackend | None:
        """The transport, or None for the CPU and synthetic backends (no model behind them)."""
        if self.backend in ("cpu", "synthetic"):
            return None
        if self.backend == "vllm":
            return VLLMBackend(
                model=self.model,
                tensor_parallel_size=self.tensor_parallel_size,
                gpu_memory_utilization=self.gpu_memory_utilization,
                max_model_len=self.max_model_len,
                seed=self.seed,
                thinking_switch=self.thinking_switch,
            )
        return OpenAIBackend(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            max_concurrency=self.max_concurrency,
            max_retries=self.max_retries,
            timeout_s=self.timeout_s,
            backoff_s=self.backoff_s,
            json_mode=self.json_mode,
            thinking_switch=self.thinking_switch,
            server=self.server,
        )

    def describe(self) -> dict:
        """Safe to log or store: no secrets."""
        return {
            "backend": self.backend,
            "model": self.model,
            **({"base_url": self.base_url} if self.backend == "openai" else {}),
        }
