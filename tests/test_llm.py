"""LLM backends, prompts/parsers, the task runner and its cache."""

import json
import math

import pytest

from saber_resources.cache import LLMCache
from saber_resources.llm import (
    LLMRequest,
    LLMResponse,
    LLMServerError,
    OpenAIBackend,
    VLLMBackend,
    p_yes,
)
from saber_resources.llm_tasks import (
    LLMPairJudge,
    LLMPointwiseJudge,
    LLMSummarizer,
    LLMTopicScorer,
    TaskRunner,
)
from saber_resources.prompts import (
    ParseError,
    judge_request,
    parse_judgment,
    parse_summary,
    parse_topic_scores,
    topic_request,
)
from saber_resources.warehouse import Warehouse
from saber_testing.fake_openai import FakeOpenAI, chat_body, default_answer

from . import fake_vllm

LABELS = ["Geometry", "Number Theory", "Algebra"]


# ----------------------------------------------------------------------------- parsers


def test_topic_parser_good_and_bad():
    good = json.dumps({"scores": {"Geometry": 1, "Number Theory": 0.25, "Algebra": 0}})
    assert parse_topic_scores(good, LABELS) == {
        "Geometry": 1.0,
        "Number Theory": 0.25,
        "Algebra": 0.0,
    }
    bad = {
        "not JSON": "The scores are: Geometry 1",
        "expected an object": json.dumps([1, 2]),
        "unknown labels": json.dumps(
            {"scores": {"Geometry": 1, "Number Theory": 0, "Algebra": 0, "Topology": 0.5}}
        ),
        "missing labels": json.dumps({"scores": {"Geometry": 1}}),
        "negative or not finite": json.dumps(
            {"scores": {"Geometry": -0.5, "Number Theory": 0, "Algebra": 0}}
        ),
        "not a number": json.dumps(
            {"scores": {"Geometry": "high", "Number Theory": 0, "Algebra": 0}}
        ),
    }
    for reason, text in bad.items():
        with pytest.raises(ParseError, match=reason):
            parse_topic_scores(text, LABELS)
    # a model's own scale (llama.cpp's grammar does not bound numbers): kept, normalised later
    ten = json.dumps({"scores": {"Geometry": 8, "Number Theory": 2, "Algebra": 0}})
    assert parse_topic_scores(ten, LABELS) == {
        "Geometry": 8.0,
        "Number Theory": 2.0,
        "Algebra": 0.0,
    }


def _core(core: str, has: bool = True, **extra) -> str:
    answer = {
        "has_core_idea": has,
        "core_idea": core,
        "supporting_ideas": ["pair the terms"],
        "keywords": ["AM-GM", "symmetry"],
        "confidence": 0.8,
    }
    return json.dumps({**answer, **extra})


def test_summary_parser_reads_the_papers_fields_good_and_bad():
    value, detail = parse_summary(_core("Pair terms symmetrically and apply AM-GM to each pair."))
    assert value == "Pair terms symmetrically and apply AM-GM to each pair."
    assert detail == {
        "has_core_idea": True,
        "core_idea": value,
        "supporting_ideas": ["pair the terms"],
        "keywords": ["AM-GM", "symmetry"],
        "confidence": 0.8,
        "style_flags": [],
    }
    none, detail = parse_summary(_core("", has=False))
    assert none is None and detail["has_core_idea"] is False and detail["keywords"]
    assert parse_summary(_core("whatever", has=False))[0] is None  # no idea: the text is moot
    # what the reference accepts is kept, flagged; the 30-word cap and an empty idea refuse
    flagged = {
        "Set $x=2$ and substitute.": ["formula"],
        "Use n+1 pigeons in n holes.": ["formula"],
        "Use induction. Then conclude.": ["more than one sentence"],
        "We use induction on the number of vertices.": ["not imperative"],
        "A parity argument on the sum settles it.": ["not imperative"],
        "Apply a classical inequality, e.g. AM-GM, to each pair.": [],
        "Reduce modulo 3, i.e. split by residues.": [],
    }
    for idea, flags in flagged.items():
        value, detail = parse_summary(_core(idea))
        assert value == idea and detail["style_flags"] == flags, idea
    bad = {
        "words": " ".join(["Use"] + ["induction"] * 30) + ".",
        "core_idea is empty": "",
    }
    for reason, s in bad.items():
        with pytest.raises(ParseError, match=reason):
            parse_summary(_core(s))
    fields = {
        "missing fields": json.dumps({"summary": "Use induction."}),
        "unknown fields": _core("Use induction.", mood="happy"),
        "has_core_idea is not": _core("Use induction.", has="yes"),
        "confidence must be": _core("Use induction.", confidence=1.5),
        "keywords must be a list": _core("Use induction.", keywords="AM-GM"),
    }
    for reason, text in fields.items():
        with pytest.raises(ParseError, match=reason):
            parse_summary(text)
    with pytest.raises(ParseError, match="not JSON"):
        parse_summary("Use induction.")


def test_judgment_and_p_yes_parsers():
    assert (
        parse_judgment("1") == 1
        and parse_judgment(" 2.\n") == 2
        and parse_judgment("Candidate 2") == 2
    )
    for bad in ["3", "1 or 2", "Both", "", "\\boxed{3}", "I pick \\boxed{1 or 2}"]:
        with pytest.raises(ParseError):
            parse_judgment(bad)
    # a reasoned answer: the last \boxed{} decides, whatever came before
    assert parse_judgment("Sample 2 looks close... \\boxed{2}\nOn reflection \\boxed{1}") == 1
    assert parse_judgment("so the answer is\n\\boxed{ 2 }") == 2
    assert parse_judgment("\\boxed{\\text{Sample 1}}") == 1
    # P(yes) renormalised over Yes/No, case and spaces ignored; the best-scoring variant counts.
    assert math.isclose(
        p_yes({" Yes": math.log(0.6), "No": math.log(0.2), "yes": math.log(0.1)}), 0.75
    )
    assert p_yes({"No": -0.1}) == 0.0
    with pytest.raises(ValueError, match="neither Yes nor No"):
        p_yes({"Maybe": -0.1})


# ------------------------------------------------------------------------------ vLLM fake


def test_vllm_backend_records_structured_output(monkeypatch):
    def answer(messages, params):
        if (
            params.kwargs["structured_outputs"]
            and "json" in params.kwargs["structured_outputs"].kwargs
        ):
            return json.dumps({"scores": {lab: 0.5 for lab in LABELS}}), None
        lp = [{11: fake_vllm.Logprob(-0.1, 1, "Yes"), 12: fake_vllm.Logprob(-2.4, 2, "No")}]
        return "Yes", lp

    record = fake_vllm.install(monkeypatch, answer)
    backend = VLLMBackend(
        model="Qwen/Qwen3-8B",
        tensor_parallel_size=2,
        gpu_memory_utilization=0.8,
        max_model_len=4096,
    )
    runner = TaskRunner(backend)
    scores = LLMTopicScorer(runner).score("Problem: find x.", LABELS)
    assert scores == {lab: 0.5 for lab in LABELS}
    p = LLMPointwiseJudge(runner).p_yes("q", "d")
    assert math.isclose(p, 1 / (1 + math.exp(-2.3)))
    init = record["init"]
    assert init["model"] == "Qwen/Qwen3-8B" and init["enable_prefix_caching"] is True
    assert (
        init["tensor_parallel_size"] == 2
        and init["gpu_memory_utilization"] == 0.8
        and init["max_model_len"] == 4096
    )
    (msgs, params), (_, params2) = record["chats"]
    schema = params[0].kwargs["structured_outputs"].kwargs["json"]
    assert schema["properties"]["scores"]["required"] == LABELS
    assert msgs[0][0]["role"] == "system" and "Candidate topics:" in msgs[0][1]["content"]
    assert params2[0].kwargs["structured_outputs"].kwargs["choice"] == ["Yes", "No"]
    assert params2[0].kwargs["logprobs"] == 10 and params2[0].kwargs["max_tokens"] == 1


# --------------------------------------------------------------------- OpenAI-compatible


def _openai(srv, **kw) -> OpenAIBackend:
    return OpenAIBackend(base_url=srv.url, model="m", api_key="sk-test", backoff_s=0.01, **kw)


def test_openai_tasks_against_local_server():
    with FakeOpenAI() as srv:
        runner = TaskRunner(_openai(srv))
        assert LLMTopicScorer(runner).score("Problem: x", LABELS) == {
            "Geometry": 1.0,
            "Number Theory": 0.0,
            "Algebra": 0.0,
        }
        assert (
            LLMSummarizer(runner).summarize("p", "s")
            == "Apply the pigeonhole principle to the residues."
        )
        assert LLMPairJudge(runner).compare("q", "a", "b") == 1
        assert math.isclose(LLMPointwiseJudge(runner).p_yes("q", "d"), 1 / (1 + math.exp(-1.5)))
    first = srv.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert (
        first["body"]["response_format"]["json_schema"]["schema"]["properties"]["scores"][
            "required"
        ]
        == LABELS
    )
    assert (
        srv.requests[3]["body"]["logprobs"] is True
        and srv.requests[3]["body"]["top_logprobs"] == 10
    )


def test_openai_retries_500_timeout_and_malformed_body():
    with FakeOpenAI(faults=["500", "timeout", "malformed"], delay_s=1.0) as srv:
        backend = _openai(srv, timeout_s=0.3, max_retries=3)
        [resp] = backend.generate([judge_request("q", "a", "b")])
    assert resp.text == "1" and backend.calls == 4


def test_openai_gives_up_with_a_clear_error():
    with FakeOpenAI(faults=["500"] * 10) as srv:
        backend = _openai(srv, max_retries=2)
        with pytest.raises(
            LLMServerError,
            match=r"127\.0\.0\.1:\d+/v1/chat/completions: giving up after 3 attempts; last error: HTTP 500",
        ):
            backend.generate([judge_request("q", "a", "b")])
    down = OpenAIBackend(base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff_s=0.01)
    with pytest.raises(
        LLMServerError, match=r"http://127\.0\.0\.1:9/v1/chat/completions: .*cannot connect"
    ):
        down.generate([judge_request("q", "a", "b")])


def test_openai_structured_outputs_mode_for_vllm_serve():
    body = OpenAIBackend(base_url="x", model="m", json_mode="structured_outputs").body(
        judge_request("q", "a", "b")
    )
    assert body["structured_outputs"] == {"choice": ["1", "2"]} and "response_format" not in body


# ---------------------------------------------------------------------- runner and cache


class CountingBackend:
    name = "fake"
    model = "m"

    def __init__(self, answer):
        self.answer = answer
        self.calls = 0

    def generate(self, requests):
        self.calls += len(requests)
        return [LLMResponse(self.answer(r)) for r in requests]


def test_cache_serves_a_second_run_without_calls():
    wh = Warehouse(path=":memory:")
    backend = CountingBackend(lambda r: "2")
    items = [("q", f"a{i}", f"b{i}") for i in range(5)]
    first = LLMPairJudge(TaskRunner(backend, LLMCache(wh.connect))).compare_batch(items)
    assert backend.calls == 5
    judge = LLMPairJudge(TaskRunner(backend, LLMCache(wh.connect)))
    second = judge.compare_batch(items)
    assert backend.calls == 5 and judge.stats.calls == 0 and judge.stats.cached == 5
    assert [o.value for o in first] == [o.value for o in second] == [2] * 5


def test_parse_failures_are_retried_then_stored_with_raw_answer():
    wh = Warehouse(path=":memory:")
    cache = LLMCache(wh.connect)
    # The answer depends on the retry seed: seed 0 garbles, seed 1 answers properly.
    flaky = CountingBackend(lambda r: "1" if r.seed == 1 else "I think the first")
    out = LLMPairJudge(TaskRunner(flaky, cache, max_retries=2), "direct").compare_batch(
        [("q", "a", "b")]
    )
    assert out[0].ok and out[0].value == 1 and out[0].attempts == 2
    hopeless = CountingBackend(lambda r: "banana")
    judge = LLMPairJudge(TaskRunner(hopeless, cache, max_retries=2), "direct")
    [bad] = judge.compare_batch([("q2", "a", "b")])
    assert not bad.ok and bad.raw == "banana" and "no \\boxed{1}" in bad.error and bad.attempts == 3
    assert hopeless.calls == 3 and judge.stats.failed == 1
    failures = cache.failures()
    assert failures.height == 4 and set(failures["answer"]) == {"banana", "I think the first"}
    # A rerun replays the stored failures instead of asking again.
    again = LLMPairJudge(TaskRunner(hopeless, cache, max_retries=2), "direct").compare_batch(
        [("q2", "a", "b")]
    )
    assert hopeless.calls == 3 and not again[0].ok


def test_request_hash_covers_the_prompt():
    a = topic_request("Problem: x", LABELS)
    assert (
        a.hash()
        == topic_request("Problem: x", LABELS).hash()
        != topic_request("Problem: y", LABELS).hash()
    )
    assert (
        LLMRequest(messages=(("user", "hi"),)).hash()
        != LLMRequest(messages=(("user", "hi"),), seed=1).hash()
    )


def test_default_answer_helper_is_consistent():
    status, body = default_answer(
        {"messages": [{"role": "user", "content": "Answer with 1 or 2 only."}]}
    )
    assert status == 200 and body == chat_body("1")


# ------------------------------------------------------------------------- the paper judge


def _paper_judge(srv, cache=None, max_tokens=64, **kw) -> LLMPairJudge:
    return LLMPairJudge(TaskRunner(_openai(srv), cache, **kw), "paper", max_tokens)


def test_paper_judge_long_reasoning_ends_in_a_boxed_answer():
    with FakeOpenAI() as srv:
        judge = _paper_judge(srv, max_tokens=4096)
        assert judge.compare("Problem: q\n\nSolution: s", "Problem: a", "Problem: b") == 1
    body = srv.requests[0]["body"]
    user = body["messages"][-1]["content"]
    # reasoning is allowed: the whole budget, no 1-or-2 constraint, no JSON schema
    assert body["max_tokens"] == 4096 and "structured_outputs" not in body
    assert "response_format" not in body
    # the paper's structure: three profiles of four parts, two comparisons with match scores,
    # the decision with three ordered tie-breakers, a boxed last line
    order = [
        "STEP 1",
        "Target: Technique Profile",
        "Sample 1: Technique Profile",
        "Sample 2: Technique Profile",
        "A. Core topic tags",
        "B. Key tools and theorems",
        "C. Primary solution moves",
        "D. Structural signature",
        "STEP 2",
        "Sample 1 vs Target",
        "Sample 2 vs Target",
        "similarities, the differences and an overall match score",
        "Technique overlap",
        "Structure alignment",
        "weighs less",
        "Difficulty is not the criterion",
        "Superficial similarity is penalised",
        "STEP 3",
        "1. the sample whose main technique",
        "2. the sample whose sequence of moves",
        "3. the sample that represents the problem the same way",
        "\\boxed{1} or \\boxed{2}",
    ]
    at = [user.find(part) for part in order]
    assert -1 not in at and at == sorted(at), dict(zip(order, at, strict=True))
    assert "Solution: s" in user
    # nothing the paper does not ask: no student, no practice, no "help"
    for added in ("student", "practi", "help"):
        assert added not in user.lower()
    assert judge.version.startswith("pair-judge/paper-v2+")


def test_paper_judge_two_boxed_answers_the_last_wins_and_none_fails():
    answers = iter(
        [
            "Maybe \\boxed{1}? No: sample 2 shares the moves.\n\\boxed{2}",
            "I cannot decide between the two samples.",
            "Still undecided.",
        ]
    )
    with FakeOpenAI(answer=lambda body: (200, chat_body(next(answers)))) as srv:
        judge = _paper_judge(srv, max_retries=1)
        [two] = judge.compare_batch([("q", "a", "b")])
        [none] = judge.compare_batch([("q2", "a", "b")])
    assert two.ok and two.value == 2
    assert not none.ok and none.raw == "Still undecided." and "no \\boxed" in none.error
    assert none.attempts == 2  # one parse retry, then a stored failure


def test_paper_judge_truncated_answer_gets_twice_the_budget_once():
    def answer(body):
        if body["max_tokens"] < 128:  # the first budget is too small: cut off mid-reasoning
            return 200, chat_body("Step 1. Target: tags ...", finish_reason="length")
        return 200, chat_body("Step 1 ... Step 3.\n\\boxed{2}")

    wh = Warehouse(path=":memory:")
    with FakeOpenAI(answer=answer) as srv:
        [ok] = _paper_judge(srv, LLMCache(wh.connect), max_tokens=64).compare_batch(
            [("q", "a", "b")]
        )
    assert ok.ok and ok.value == 2 and ok.attempts == 2
    assert [r["body"]["max_tokens"] for r in srv.requests] == [64, 128]

    def always_cut(body):
        return 200, chat_body("Step 1. " + "x" * body["max_tokens"], finish_reason="length")

    cache = LLMCache(wh.connect)
    with FakeOpenAI(answer=always_cut) as srv:
        judge = _paper_judge(srv, cache, max_tokens=32, max_retries=3)
        [bad] = judge.compare_batch([("q3", "a", "b")])
    assert not bad.ok and "cut off at the token limit (64 tokens)" in bad.error
    assert bad.raw.startswith("Step 1. ") and bad.attempts == 2  # retried once, not max_retries
    assert [r["body"]["max_tokens"] for r in srv.requests] == [32, 64]
    # the cut-off answers are cached with their finish reason: a rerun asks nothing
    with FakeOpenAI(answer=always_cut) as srv:
        [again] = _paper_judge(srv, cache, max_tokens=32, max_retries=3).compare_batch(
            [("q3", "a", "b")]
        )
    assert not again.ok and srv.requests == []


def test_the_reference_reads_a_cut_off_judge_answer_from_its_reasoning():
    """``cut_off: read_reasoning`` (paper.yaml): an answer cut off at its budget is read by the
    first \\boxed{1|2} of the server's ``reasoning_content`` (no second request at twice the
    budget); one with none there is an unparsed answer, asked again at the same budget, then a
    failure. The reasoning is cached with the cut-off answer: a rerun asks nothing. Planted:
    saber's rule on the same server asks again at 128 tokens."""

    def cut(reasoning):
        message = {"role": "assistant", "content": None, "reasoning_content": reasoning}
        return 200, {"choices": [{"index": 0, "message": message, "finish_reason": "length"}]}

    def answer(body):
        user = body["messages"][-1]["content"]
        if "QUERY-UNDECIDED" in user:
            return cut("Step 1. Both samples use induction; step 2 is")
        return cut("Step 3. Sample 2 shares the key step, so \\boxed{2}; let me double-check")

    wh = Warehouse(path=":memory:")

    def judge(srv, cut_off="read_reasoning"):
        runner = TaskRunner(_openai(srv), LLMCache(wh.connect), max_retries=1)
        return LLMPairJudge(runner, "paper", 64, cut_off=cut_off)

    items = [("QUERY-DECIDED", "a", "b"), ("QUERY-UNDECIDED", "a", "b")]
    with FakeOpenAI(answer=answer) as srv:
        reference = judge(srv)
        read, unread = reference.compare_batch(items)
    assert read.ok and read.value == 2 and read.attempts == 1
    assert not unread.ok and unread.attempts == 2
    assert "cut off at 64 tokens and not read from its reasoning" in unread.error
    assert [r["body"]["max_tokens"] for r in srv.requests] == [64, 64, 64]  # never 128
    assert reference.stats.salvaged == 1 and "+cut-read_reasoning+" in reference.version
    with FakeOpenAI(answer=answer) as srv:
        again = judge(srv).compare_batch(items)
    assert srv.requests == [] and again[0].value == 2 and not again[1].ok
    # saber's rule on the same answers: twice the budget, the reasoning never read
    with FakeOpenAI(answer=answer) as srv:
        [doubled, _] = judge(srv, "retry_doubled").compare_batch(items)
    assert not doubled.ok and "within 128 tokens" in doubled.error
    assert sorted(r["body"]["max_tokens"] for r in srv.requests) == [64, 64, 128, 128]
    with pytest.raises(ValueError, match="cut_off must be one of"):
        LLMPairJudge(TaskRunner(_openai(srv)), "paper", 64, cut_off="guess")


def test_judges_give_p_first_from_logprobs():
    direct_answer = chat_body("2", {"1": math.log(0.3), "2": math.log(0.6), "x": -9.0})
    reasoning = ["Step 3. Sample 1 shares the moves.\n", "\\boxed{", "1", "}"]
    alts = [{t: -0.01} for t in reasoning]
    alts[2] = {"1": math.log(0.8), "2": math.log(0.2)}
    paper_answer = chat_body("".join(reasoning), tokens=list(zip(reasoning, alts, strict=True)))

    def answer(body):
        if body["max_tokens"] == 2:
            assert body["logprobs"] is True and body["top_logprobs"] == 5
            return 200, direct_answer
        assert body["logprobs"] is True  # the paper judge asks for every token's alternatives
        return 200, paper_answer

    with FakeOpenAI(answer=answer) as srv:
        [d] = LLMPairJudge(TaskRunner(_openai(srv)), "direct").compare_batch([("q", "a", "b")])
        [p] = LLMPairJudge(TaskRunner(_openai(srv)), "paper", 256).compare_batch([("q", "a", "b")])
    assert d.value == 2 and d.p_first == pytest.approx(1 / 3)
    assert p.value == 1 and p.p_first == pytest.approx(0.8)
    # no logprobs from the backend: no probability, the decision stands
    with FakeOpenAI() as srv:
        [x] = LLMPairJudge(TaskRunner(_openai(srv)), "direct").compare_batch([("q", "a", "b")])
    assert x.value == 1 and x.p_first is None


def test_ordinal_judge_parser_and_openai_round_trip():
    from saber_resources.llm_tasks import LLMOrdinalJudge
    from saber_resources.prompts import parse_ordinal

    assert parse_ordinal("Close in method.\n\\boxed{85}") == 85
    assert parse_ordinal("\\boxed{10} at first; on reflection \\boxed{ 0 }") == 0
    assert parse_ordinal("\\boxed{100.0}") == 100
    for bad, why in [
        ("\\boxed{101}", "outside the scale"),
        ("\\boxed{72.5}", "not an integer"),
        ("\\boxed{high}", "not an integer"),
        ('{"score": 4}', "no \\\\boxed"),
        ("72", "no \\\\boxed"),
    ]:
        with pytest.raises(ParseError, match=why):
            parse_ordinal(bad)
    with FakeOpenAI() as srv:
        [out] = LLMOrdinalJudge(TaskRunner(_openai(srv))).score_batch([("q", "c")])
    assert out.ok and out.value == 60
    body = srv.requests[0]["body"]
    assert "response_format" not in body and body["max_tokens"] == 2048  # room to reason first


def test_pair_judge_vote_draws_are_sampled_and_cached_apart():
    wh = Warehouse(path=":memory:")
    seen = []
    backend = CountingBackend(lambda r: seen.append((r.seed, r.temperature)) or "1")
    judge = LLMPairJudge(TaskRunner(backend, LLMCache(wh.connect)), prompt="direct")
    for k in range(3):
        judge.compare_batch([("q", "a", "b")], k, 0.9)
    # draw 0 is the tournament's own request; later draws get their own seed and temperature
    assert seen == [(0, 0.0), (1000, 0.9), (2000, 0.9)]
    judge.compare_batch([("q", "a", "b")], 2, 0.9)
    assert backend.calls == 3  # a repeated draw is served from the cache


def test_thinking_is_switched_per_task_in_the_request_body():
    """`llm.thinking`: the judge thinks with the paper prompt, not with the direct one; P(yes)
    never; the switch travels as `chat_template_kwargs` for Qwen3-style templates and not at
    all for a model without it (whose requests keep their cache keys)."""
    from saber_assets.lib.tasks import thinking_by_task
    from saber_resources.llm import LLMResource

    qwen = LLMResource(backend="openai", model="m", thinking_switch="chat_template_kwargs",
                       thinking={"topics": "off"})  # fmt: skip
    assert thinking_by_task(qwen, "paper") == {"topics": False, "judge": True, "pointwise": False}
    assert thinking_by_task(qwen, "direct")["judge"] is False
    assert thinking_by_task(LLMResource(backend="openai", thinking={"topics": "on"}), "paper") == {}
    with FakeOpenAI() as srv:
        on = thinking_by_task(qwen, "direct")
        runner = TaskRunner(_openai(srv, thinking_switch="chat_template_kwargs"), thinking=on)
        LLMTopicScorer(runner).score("Problem: x", LABELS)
        LLMPairJudge(runner, prompt="direct").compare("q", "a", "b")
        LLMPointwiseJudge(runner).p_yes("q", "d")
        LLMSummarizer(runner).summarize("p", "s")  # not configured: the model's default
        plain = TaskRunner(_openai(srv))  # a model without the switch: nothing sent
        LLMPairJudge(plain, prompt="direct").compare("q2", "a", "b")
    bodies = [r["body"] for r in srv.requests]
    assert [b.get("chat_template_kwargs") for b in bodies] == [
        {"enable_thinking": False}, {"enable_thinking": False}, {"enable_thinking": False},
        None, None,
    ]  # fmt: skip
    # a request without a switch hashes as before; with one, it is another cache entry
    req = judge_request("q", "a", "b")
    assert "thinking" not in req.to_json()
    import dataclasses

    assert dataclasses.replace(req, thinking=True).hash() != req.hash()


def test_vllm_in_process_gets_the_switch_per_call(monkeypatch):
    record = fake_vllm.install(monkeypatch, lambda m, p: ("1", None))
    backend = VLLMBackend(model="Qwen/Qwen3-8B", thinking_switch="chat_template_kwargs")
    runner = TaskRunner(backend, thinking={"judge": False})
    LLMPairJudge(runner, prompt="direct").compare("q", "a", "b")
    assert record["template_kwargs"] == [{"enable_thinking": False}]


def test_a_tasks_decoding_from_the_config_reaches_the_request_body(tmp_path):
    """`llm.temperature`, `llm.reasoning_effort`, `llm.system_prompt` per task (the reference
    judges at temperature 1.0, effort high, "You are a helpful expert."): the judge's requests
    carry them, the summarizer's do not; llama.cpp gets the effort as a chat-template kwarg."""
    from saber_assets.config import LLMConfig
    from saber_assets.definitions import llm_resource
    from saber_assets.lib.tasks import tasks_for
    from saber_resources.stores import StoresResource

    stores = StoresResource(kind="duckdb", path=str(tmp_path / "stores.duckdb"))
    with FakeOpenAI() as srv:
        cfg = LLMConfig(
            backend="openai", model="m", base_url=srv.url, server="vllm",
            temperature={"judge": 1.0}, reasoning_effort={"judge": "high"},
            system_prompt={"judge": "You are a helpful expert."},
        )  # fmt: skip
        tasks = tasks_for(llm_resource(cfg), stores, judge_prompt="direct")
        tasks.pair_judge.compare("q", "a", "b")
        tasks.summarizer.summarize("p", "s")
    judge, summary = [r["body"] for r in srv.requests if r["body"]]
    assert judge["temperature"] == 1.0 and judge["reasoning_effort"] == "high"
    assert judge["messages"][0] == {"role": "system", "content": "You are a helpful expert."}
    assert [m["role"] for m in judge["messages"]] == ["system", "user"]
    assert summary["temperature"] == 0.0 and "reasoning_effort" not in summary
    assert summary["messages"][0]["content"] != "You are a helpful expert."
    llama = OpenAIBackend(base_url="http://x", model="m", server="llama.cpp")
    req = judge_request("q", "a", "b")
    import dataclasses

    body = llama.body(dataclasses.replace(req, reasoning_effort="high"))
    assert body["chat_template_kwargs"] == {"reasoning_effort": "high"}
    assert "reasoning_effort" not in req.to_json()  # unset: the cache keys stay as they were


def test_vllm_in_process_gets_the_reasoning_effort_as_a_template_kwarg(monkeypatch):
    from saber_resources.llm_tasks import Decoding

    record = fake_vllm.install(monkeypatch, lambda m, p: ("1", None))
    runner = TaskRunner(
        VLLMBackend(model="openai/gpt-oss-120b"),
        decoding={"judge": Decoding(temperature=1.0, reasoning_effort="high")},
    )
    LLMPairJudge(runner, prompt="direct").compare("q", "a", "b")
    assert record["template_kwargs"] == [{"reasoning_effort": "high"}]
