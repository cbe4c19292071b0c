"""Task-level interfaces over the LLM: TopicScorer, Summarizer, PairJudge, PointwiseJudge.

Each has an LLM implementation (versioned prompt + strict parser, through ``TaskRunner`` which
caches every request/answer and retries unparseable answers) and a CPU one (``cpu_tasks``).
Every task reports ``backend``, ``model`` and ``version``: they are stored with every output.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from saber_resources.cache import LLMCache
from saber_resources.llm import NO_CONTENT, REFUSED, LLMBackend, LLMRequest, LLMResponse
from saber_resources.progress import progress
from saber_resources.prompts import (
    BOXED_CHOICES,
    CUT_OFF_RULES,
    JUDGE_VERSIONS,
    ORDINAL_VERSION,
    POINTWISE_VERSION,
    REFERENCE_SUMMARY_SCHEMA,
    SEGMENT_VERSION,
    SUMMARY_VERSION,
    TOPIC_VERSION,
    TRANSLATE_VERSION,
    ParseError,
    Truncated,
    judge_request,
    judgment_p_first,
    ordinal_request,
    paper_judge_request,
    parse_judgment,
    parse_ordinal,
    parse_p_yes,
    parse_segment,
    parse_summary,
    parse_topic_scores,
    parse_translation,
    pointwise_request,
    problem_text,
    read_cut_off_judgment,
    segment_request,
    summary_request,
    topic_request,
    translate_request,
)
from saber_resources.templates import PromptTemplate, builtin_template

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    """One task answer: the parsed value, or the reason it failed and the last raw answer."""

    value: T | None
    ok: bool = True
    error: str | None = None
    raw: str | None = None
    attempts: int = 1
    p_first: float | None = None  # pair judges: P(the candidate shown first is better), if known
    detail: dict | None = None  # summaries: every field of the answer (the value is the core idea)


# the task runner's own retries (an answer, not a fault): a new seed, twice the budget
TASK_RETRIES = ("unparsed", "cut_off")


@dataclass
class TaskStats:
    calls: int = 0  # requests sent to the backend
    cached: int = 0  # answers served from the cache
    parse_failures: int = 0  # answers that did not parse (each retried while attempts remain)
    failed: int = 0  # items that never produced a valid answer
    refused: int = 0  # requests the server refused (HTTP 400/413/422: e.g. over its context)
    # retries by cause: "unparsed" (a new seed), "cut_off" (twice the budget), and the
    # transport's own ("timeout", "connection", "http_503", "malformed_body", ...)
    retries: Counter = field(default_factory=Counter)
    lost_s: float = 0.0  # seconds the transport lost to faults (failed attempts, their waits)
    prompt_tokens: int = 0  # the server's ``usage`` over fresh answers
    completion_tokens: int = 0
    seconds: float = 0.0  # waiting for the backend
    max_in_flight: int = 0  # the most requests the transport had in flight at once
    salvaged: int = 0  # cut-off answers read from their reasoning (``TaskRunner.run``'s salvage)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def faults(self) -> dict[str, int]:
        """The transport's retries by cause (faults met), without the runner's own."""
        return {k: v for k, v in self.retries.items() if k not in TASK_RETRIES}


class TaskFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Decoding:
    """One task's decoding where it differs from saber's: the sampling temperature, a reasoning
    model's effort, the system line in place of the template's."""

    temperature: float | None = None
    reasoning_effort: str | None = None
    system: str | None = None

    def apply(self, req: LLMRequest) -> LLMRequest:
        changes: dict = {}
        if self.temperature is not None:
            changes["temperature"] = self.temperature
        if self.reasoning_effort is not None:
            changes["reasoning_effort"] = self.reasoning_effort
        if self.system is not None:
            rest = tuple(m for m in req.messages if m[0] != "system")
            changes["messages"] = (("system", self.system), *rest)
        return dataclasses.replace(req, **changes)


def decoding_by_task(
    temperature: dict[str, float], reasoning_effort: dict[str, str], system_prompt: dict[str, str]
) -> dict[str, Decoding]:
    tasks = set(temperature) | set(reasoning_effort) | set(system_prompt)
    return {
        t: Decoding(temperature.get(t), reasoning_effort.get(t), system_prompt.get(t))
        for t in sorted(tasks)
    }


@dataclass
class TaskRunner:
    """Cache lookup -> batched generate for the misses -> strict parse -> retry the failures.

    Retries of unparseable answers change the seed and sample at ``retry_temperature`` (a
    deterministic server would otherwise repeat the same bad answer). An answer cut off by the
    token limit (finish_reason "length"), or one without content (a reasoning model that spent
    the budget thinking), is retried once with twice the budget, same seed and temperature, and
    is a failure if it is cut off again; or, where ``run`` is given a ``salvage`` reader, the
    cut-off answer is read by it (the reference reads the judge's first \\boxed{} in its
    reasoning) and, when that finds nothing, is an unparsed answer (a new seed, the same budget).
    A request the server refuses (HTTP 400/413/422, e.g. a
    prompt longer than its context) is a failure at once, with the server's reason, and is not
    cached. Each attempt is its own cache entry.
    Answers are cached after every sub-batch of ``batch_size``, so a crash loses at most one.
    """

    backend: LLMBackend
    cache: LLMCache | None = None
    max_retries: int = 2
    retry_temperature: float = 0.7
    batch_size: int = 512
    stats: TaskStats = field(default_factory=TaskStats)
    # task -> thinking on (True) / off (False); a task absent: the model's default
    thinking: dict[str, bool] = field(default_factory=dict)
    # task -> how its requests are decoded where not saber's default (``Decoding``)
    decoding: dict[str, Decoding] = field(default_factory=dict)

    @property
    def backend_name(self) -> str:
        return self.backend.name

    @property
    def model(self) -> str:
        return self.backend.model

    def _variant(self, req: LLMRequest, retries: int, doubled: bool) -> LLMRequest:
        if doubled:
            req = dataclasses.replace(req, max_tokens=2 * req.max_tokens)
        if retries == 0:
            return req
        return dataclasses.replace(
            req, seed=req.seed + retries, temperature=max(req.temperature, self.retry_temperature)
        )

    def run(
        self,
        version: str,
        requests: Sequence[LLMRequest],
        parse: Callable[[int, LLMResponse], T],
        salvage: Callable[[int, LLMResponse], T] | None = None,
    ) -> list[Outcome[T]]:
        """``parse(i, response)`` parses the answer to ``requests[i]`` or raises ParseError;
        ``salvage(i, response)``, where given, reads an answer cut off at its budget (its
        ``reasoning`` kept) instead of asking again with twice the budget."""
        outcomes: list[Outcome[T] | None] = [None] * len(requests)
        retries = [0] * len(requests)  # parse retries used
        doubled = [False] * len(requests)  # the token budget was doubled after a cut-off answer
        attempts = [0] * len(requests)
        pending = list(range(len(requests)))
        with progress(f"{version} requests", len(requests), "req") as shown:
            while pending:
                retry: list[int] = []
                for start in range(0, len(pending), self.batch_size):
                    chunk = pending[start : start + self.batch_size]
                    reqs = [self._variant(requests[i], retries[i], doubled[i]) for i in chunk]
                    retried_before = len(retry)
                    answers = self._attempt(version, reqs, parse, chunk, salvage)
                    for i, ok, err, raw, cut in answers:
                        attempts[i] += 1
                        if ok is not None:
                            outcomes[i] = Outcome(ok[0], raw=raw, attempts=attempts[i])
                            continue
                        if cut == REFUSED:  # the same request would be refused again
                            self.stats.failed += 1
                            outcomes[i] = Outcome(None, ok=False, error=err, attempts=attempts[i])
                        elif cut and not doubled[i]:
                            doubled[i] = True
                            self.stats.retries["cut_off"] += 1
                            retry.append(i)
                        elif not cut and retries[i] < self.max_retries:
                            retries[i] += 1
                            self.stats.retries["unparsed"] += 1
                            retry.append(i)
                        else:
                            self.stats.failed += 1
                            outcomes[i] = Outcome(
                                None, ok=False, error=err, raw=raw, attempts=attempts[i]
                            )
                    shown.advance(len(chunk) - (len(retry) - retried_before))  # those settled
                pending = retry
        return outcomes  # type: ignore[return-value]

    def _salvaged(self, i: int, ans: LLMResponse, budget: int, salvage) -> T:
        """``salvage``'s reading of a cut-off answer, counted; a ParseError names the budget."""
        try:
            value = salvage(i, ans)
        except ParseError as exc:
            raise ParseError(
                f"cut off at {budget} tokens and not read from its reasoning: {exc}"
            ) from None
        self.stats.salvaged += 1
        return value

    def _generate(self, reqs: list[LLMRequest]) -> list[LLMResponse]:
        """The backend's answers, with what they cost added to the stats."""
        transport = getattr(self.backend, "transport", None)
        before = Counter(transport.retries) if transport is not None else Counter()
        lost_before = transport.lost_s if transport is not None else 0.0
        t0 = time.perf_counter()
        fresh = self.backend.generate(reqs)
        self.stats.seconds += time.perf_counter() - t0
        if transport is not None:
            self.stats.retries.update(transport.retries - before)
            self.stats.lost_s += transport.lost_s - lost_before
            self.stats.max_in_flight = max(self.stats.max_in_flight, transport.max_in_flight)
        for r in fresh:
            self.stats.prompt_tokens += r.prompt_tokens or 0
            self.stats.completion_tokens += r.completion_tokens or 0
        return fresh

    def _attempt(self, version, reqs: list[LLMRequest], parse, idx: list[int], salvage=None):
        hashes = [r.hash() for r in reqs]
        cached = (
            self.cache.get_many(self.backend_name, self.model, version, hashes)
            if self.cache
            else {}
        )
        need = [k for k, h in enumerate(hashes) if h not in cached]
        self.stats.cached += len(reqs) - len(need)
        fresh = self._generate([reqs[k] for k in need]) if need else []
        self.stats.calls += len(need)
        answers = {
            k: LLMResponse(
                cached[h].text,
                cached[h].top_logprobs,
                cached[h].finish_reason,
                cached[h].token_logprobs,
                reasoning=cached[h].reasoning,
            )
            for k, h in enumerate(hashes)
            if h in cached
        }
        answers.update(zip(need, fresh, strict=True))
        results, rows = [], []
        fresh_idx = set(need)
        for k, i in enumerate(idx):
            ans = answers[k]
            # a closed answer set is never cut off: its budget fits the longest choice, and a
            # server that stops at the budget before the end-of-text says "length" (llama.cpp
            # and vLLM alike for a one-token "Yes")
            closed = bool(reqs[k].choices)
            if ans.finish_reason == REFUSED:  # never cached: a rerun asks again, e.g. after the
                self.stats.refused += 1  # server was given a larger context
                reason = f"the server refused the request: {ans.text}"
                results.append((i, None, reason, None, REFUSED))
                continue
            cut = ans.finish_reason == NO_CONTENT or (ans.finish_reason == "length" and not closed)
            try:
                if cut and salvage is not None:
                    value, err = (self._salvaged(i, ans, reqs[k].max_tokens, salvage),), None
                elif ans.finish_reason == "length" and not closed:
                    raise Truncated(
                        f"answer cut off at the token limit ({reqs[k].max_tokens} tokens)"
                    )
                elif ans.finish_reason == NO_CONTENT:
                    raise Truncated(
                        f"no answer content within {reqs[k].max_tokens} tokens (content: null)"
                    )
                else:
                    value, err = (parse(i, ans),), None
            except ParseError as exc:
                value, err = None, str(exc)
                self.stats.parse_failures += 1
            # a salvaged answer is never asked again with more budget: unread, it is unparsed
            results.append((i, value, err, ans.text, cut and salvage is None))
            if k in fresh_idx:
                rows.append(
                    (
                        hashes[k],
                        reqs[k].to_json(),
                        ans.text,
                        ans.top_logprobs,
                        value is not None,
                        err,
                        ans.finish_reason,
                        ans.token_logprobs,
                        ans.reasoning if cut else None,
                    )
                )
        if self.cache:
            self.cache.put_many(self.backend_name, self.model, version, rows)
        return results


# ------------------------------------------------------------------------------ interfaces


class TopicScorer(Protocol):
    backend: str
    model: str
    version: str

    def text_for(self, problem: str, solution: str) -> str: ...

    def score_batch(
        self, items: Sequence[tuple[str, list[str]]]
    ) -> list[Outcome[dict[str, float]]]: ...


class Summarizer(Protocol):
    backend: str
    model: str
    version: str

    def summarize_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[str | None]]: ...


class PairJudge(Protocol):
    backend: str
    model: str
    version: str

    def text_for(self, problem: str, solution: str) -> str: ...

    def compare_batch(
        self, items: Sequence[tuple[str, str, str]], sample: int = 0, temperature: float = 0.7
    ) -> list[Outcome[int]]: ...


class OrdinalJudge(Protocol):
    backend: str
    model: str
    version: str

    def text_for(self, problem: str, solution: str) -> str: ...

    def score_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[int]]: ...


class PointwiseJudge(Protocol):
    backend: str
    model: str
    version: str

    def p_yes_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[float]]: ...


def _single(outcome: Outcome[T]) -> T:
    if not outcome.ok:
        raise TaskFailed(f"{outcome.error} (raw answer: {outcome.raw!r:.200})")
    return outcome.value  # type: ignore[return-value]


class _LLMTask:
    parser = ""  # the parser's revision: the version is it plus the template's hash
    task = ""  # the name `llm.thinking`, `llm.max_tokens` and `prompts` set it by
    builtin = ""  # the built-in template's name (default: the task)

    def __init__(
        self,
        runner: TaskRunner,
        template: PromptTemplate | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.runner = runner
        self.backend = runner.backend_name
        self.model = runner.model
        self.template = template or builtin_template(self.builtin or self.task)
        self.max_tokens = max_tokens  # None: the task's default budget
        self.version = self.template.version(self.parser)

    def run(self, requests: Sequence[LLMRequest], parse, salvage=None) -> list:
        """The runner's ``run`` with this task's thinking switch on every request."""
        thinking = self.runner.thinking.get(self.task)
        if thinking is not None:
            requests = [dataclasses.replace(r, thinking=thinking) for r in requests]
        decoding = self.runner.decoding.get(self.task)
        if decoding is not None:
            requests = [decoding.apply(r) for r in requests]
        return self.runner.run(self.version, requests, parse, salvage)

    @property
    def stats(self) -> TaskStats:
        return self.runner.stats


class LLMTopicScorer(_LLMTask):
    """Scores a node's children; ``answer_format`` ``reference`` reads answers as the reference
    code does (``prompts.parse_topic_scores``), its outcomes cached apart."""

    parser = TOPIC_VERSION
    task = "topics"

    def __init__(
        self,
        runner: TaskRunner,
        template: PromptTemplate | None = None,
        max_tokens: int | None = None,
        answer_format: str = "strict",
    ) -> None:
        self.answer_format = answer_format
        if answer_format != "strict":
            self.parser = f"{TOPIC_VERSION}+{answer_format}"
        super().__init__(runner, template, max_tokens)

    def text_for(self, problem: str, solution: str) -> str:
        return problem_text(problem, solution)

    def score_batch(self, items):
        reqs = [
            topic_request(text, labels, self.template, self.max_tokens) for text, labels in items
        ]
        return self.run(
            reqs, lambda i, r: parse_topic_scores(r.text, items[i][1], self.answer_format)
        )

    def score(self, text: str, labels: list[str]) -> dict[str, float]:
        return _single(self.score_batch([(text, labels)])[0])


class LLMSummarizer(_LLMTask):
    """The paper's summary fields; the value of an outcome is the core idea (None: the problem
    has none), its ``detail`` every field."""

    parser = SUMMARY_VERSION
    task = "summaries"

    def __init__(
        self,
        runner: TaskRunner,
        template: PromptTemplate | None = None,
        max_tokens: int | None = None,
        word_cap: bool = True,
        answer_format: str = "strict",
    ) -> None:
        self.word_cap, self.answer_format = word_cap, answer_format
        # another parse: its outcomes are cached apart
        self.parser = (
            SUMMARY_VERSION
            + ("" if word_cap else "+uncapped")
            + ("" if answer_format == "strict" else f"+{answer_format}")
        )
        super().__init__(runner, template, max_tokens)

    def summarize_batch(self, items):
        requests = [summary_request(p, s, self.template, self.max_tokens) for p, s in items]
        if self.answer_format == "reference":  # a constraining server asks the appendix's fields
            requests = [
                dataclasses.replace(r, json_schema=REFERENCE_SUMMARY_SCHEMA) for r in requests
            ]
        outcomes = self.run(
            requests, lambda i, r: parse_summary(r.text, self.word_cap, self.answer_format)
        )
        for o in outcomes:
            if o.ok:
                o.value, o.detail = o.value
        return outcomes

    def summarize(self, problem: str, solution: str) -> str | None:
        return _single(self.summarize_batch([(problem, solution)])[0])


class LLMPairJudge(_LLMTask):
    """``paper`` (default): reasons in three steps and ends with \\boxed{1|2}, within
    ``max_tokens`` (a cut-off answer is retried once with twice the budget, or with ``cut_off``
    ``read_reasoning`` read from its reasoning's first \\boxed{1|2}); ``direct``: answers
    the digit at once (two tokens). Query and candidates are shown with their solutions."""

    task = "judge"

    def __init__(
        self,
        runner: TaskRunner,
        prompt: str = "paper",
        max_tokens: int = 4096,
        template: PromptTemplate | None = None,
        boxed_answer: str = "last",
        cut_off: str = "retry_doubled",
    ) -> None:
        if prompt not in JUDGE_VERSIONS:
            raise ValueError(
                f"judge prompt must be one of {sorted(JUDGE_VERSIONS)}, not {prompt!r}"
            )
        if boxed_answer not in BOXED_CHOICES:
            raise ValueError(f"boxed_answer must be one of {BOXED_CHOICES}, not {boxed_answer!r}")
        if cut_off not in CUT_OFF_RULES:
            raise ValueError(f"cut_off must be one of {CUT_OFF_RULES}, not {cut_off!r}")
        self.prompt, self.boxed_answer, self.cut_off = prompt, boxed_answer, cut_off
        self.builtin = f"judge:{prompt}"
        self.parser = JUDGE_VERSIONS[prompt]
        if boxed_answer != "last":  # another parse: another judge version, another tournament
            self.parser += f"+{boxed_answer}-1or2-boxed"
        if cut_off != "retry_doubled":
            self.parser += f"+cut-{cut_off}"
        super().__init__(runner, template, max_tokens if prompt == "paper" else 2)

    def text_for(self, problem: str, solution: str) -> str:
        return problem_text(problem, solution)

    def request(self, query: str, first: str, second: str) -> LLMRequest:
        if self.prompt == "paper":
            return paper_judge_request(query, first, second, self.max_tokens, self.template)
        return judge_request(query, first, second, self.template)

    def compare_batch(self, items, sample: int = 0, temperature: float = 0.7):
        """``sample`` > 0: an independent draw at ``temperature`` with its own seed (the
        majority-vote regime); sample 0 is the tournament's own deterministic request."""
        reqs = [self.request(q, a, b) for q, a, b in items]
        if sample:
            reqs = [
                dataclasses.replace(r, seed=1000 * sample, temperature=temperature) for r in reqs
            ]

        def from_reasoning(i: int, r: LLMResponse) -> tuple[int, None]:
            return read_cut_off_judgment(r.reasoning, r.text), None

        outcomes = self.run(
            reqs,
            lambda i, r: (
                parse_judgment(r.text, self.boxed_answer),
                judgment_p_first(r.text, r.top_logprobs, r.token_logprobs, self.boxed_answer),
            ),
            from_reasoning if self.cut_off == "read_reasoning" else None,
        )
        for o in outcomes:  # (choice, P(first)) -> the choice, with P(first) beside it
            if o.ok:
                o.value, o.p_first = o.value
        return outcomes

    def compare(self, query: str, a: str, b: str) -> int:
        return _single(self.compare_batch([(query, a, b)])[0])


class LLMPointwiseJudge(_LLMTask):
    parser = POINTWISE_VERSION
    task = "pointwise"

    def p_yes_batch(self, items):
        return self.run(
            [pointwise_request(q, d, template=self.template) for q, d in items],
            lambda i, r: parse_p_yes(r.top_logprobs),
        )

    def p_yes(self, query: str, doc: str) -> float:
        return _single(self.p_yes_batch([(query, doc)])[0])


class LLMOrdinalJudge(_LLMTask):
    """One query–candidate pair on the absolute 0–100 scale of ``ordinal_request``."""

    task = "ordinal"
    parser = ORDINAL_VERSION

    def text_for(self, problem: str, solution: str) -> str:
        return problem_text(problem, solution)

    def score_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[int]]:
        return self.run(
            [ordinal_request(q, c, self.template, self.max_tokens) for q, c in items],
            lambda i, r: parse_ordinal(r.text),
        )


class LLMSegmenter(_LLMTask):
    """A statement's mathematical expressions (verbatim) and its prose, for math whose notation
    is not LaTeX (the paper's segmentation for math_vs_words)."""

    task = "math_split"
    parser = SEGMENT_VERSION

    def segment_batch(self, texts: Sequence[str]) -> list[Outcome[tuple[list[str], str]]]:
        return self.run(
            [segment_request(t, self.template, self.max_tokens) for t in texts],
            lambda i, r: parse_segment(r.text, texts[i]),
        )


class LLMTranslator(_LLMTask):
    """Query translation for cross-lingual retrieval; formulas must survive byte for byte."""

    task = "translate"
    parser = TRANSLATE_VERSION

    def translate_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[str]]:
        reqs = [translate_request(t, target, self.template, self.max_tokens) for t, target in items]
        return self.run(reqs, lambda i, r: parse_translation(r.text, items[i][0]))
