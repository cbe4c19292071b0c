"""Requests and strict parsers for the LLM tasks.

The text of every request is a template (``templates``: the built-in files in
``prompt_templates/``, or a user's under ``prompts.<task>``); this module fills it, sets the
answer format (JSON schema, choices, logprobs) and the output budget, and parses the answer.
The version stored with every output and part of every cache key is the parser revision below
plus the template's hash: change a parser, bump its revision; change a text, and the hash moves.
A parser returns the value or raises ``ParseError`` with a precise reason; nothing is guessed.
"""

from __future__ import annotations

import json
import math
import re

from saber_resources.llm import LLMRequest, p_yes
from saber_resources.math_spans import LATEX_SPANS
from saber_resources.templates import PromptTemplate, builtin_template

# parser revisions (the version of an answer is this + "+" + its template's hash)
TOPIC_VERSION = "topic-scores/v1"
SUMMARY_VERSION = "core-idea/v2"  # the paper's fields: has_core_idea, core_idea, ... confidence
JUDGE_PAPER_VERSION = "pair-judge/paper-v2"  # reasoning, then \boxed{1|2} (the paper's structure)
JUDGE_DIRECT_VERSION = "pair-judge/direct-v1"  # "1" or "2" at once (cheap)
JUDGE_VERSIONS = {"paper": JUDGE_PAPER_VERSION, "direct": JUDGE_DIRECT_VERSION}
POINTWISE_VERSION = "pointwise-yes/v1"
ORDINAL_VERSION = "ordinal-score/v2"  # one query–candidate pair, 0–100 after reasoning, boxed
SEGMENT_VERSION = "math-words-split/v1"  # a statement's formulas vs its prose (non-LaTeX math)
TRANSLATE_VERSION = "translate/v1"

MAX_SUMMARY_WORDS = 30
# default output budgets (llm.max_tokens.<task> overrides them): enough for the answer of a model
# that does not think first; a reasoning model needs its reasoning on top
DEFAULT_MAX_TOKENS = {
    "summaries": 384,
    "ordinal": 2048,
    "math_split": 1024,
    "translate": 2048,
}


def topic_budget(n_labels: int) -> int:
    """The topic scorer's default budget: the JSON object of ``n_labels`` scores."""
    return 64 + 24 * n_labels


def _template(template: PromptTemplate | None, name: str) -> PromptTemplate:
    return template if template is not None else builtin_template(name)


class ParseError(ValueError):
    """The answer does not follow the required format; the message says how."""


class Truncated(ParseError):
    """The answer was cut off by the token limit (finish_reason "length")."""


def _problem_block(problem: str, solution: str | None) -> str:
    return f"Problem:\n{problem}" + (f"\n\nSolution:\n{solution}" if solution else "")


def _strict_json(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not JSON: {exc.msg} at position {exc.pos}") from None


# ------------------------------------------------------------------------------ topic scores


class ProblemText(str):
    """A problem as shown to a model (the statement, then its worked solution) that keeps both
    parts, for a template that names them apart (the reference's verbatim judge prompt)."""

    problem: str
    solution: str

    def __new__(cls, problem: str, solution: str | None) -> ProblemText:
        text = super().__new__(cls, _problem_block(problem, solution))
        text.problem, text.solution = problem, solution or ""
        return text

    def __reduce__(self):
        return ProblemText, (self.problem, self.solution)


def problem_text(problem: str, solution: str | None) -> ProblemText:
    """How a problem is shown to a model: the statement, then its worked solution."""
    return ProblemText(problem, solution)


def judge_values(template: PromptTemplate, query: str, first: str, second: str) -> dict[str, str]:
    """The judge template's values: each item whole, or (a template naming them apart) each
    item's statement and solution."""
    if not template.split:
        return {"target_problem": query, "sample_1": first, "sample_2": second}
    values = {}
    for name, text in (("target", query), ("sample1", first), ("sample2", second)):
        if not isinstance(text, ProblemText):
            raise ValueError(
                f"{template.source} names each item's statement and solution apart, but the "
                f"{name} text came whole (not made by the judge's text_for)"
            )
        values[f"{name}_problem"], values[f"{name}_solution"] = text.problem, text.solution
    return values


def topic_request(
    text: str,
    labels: list[str],
    template: PromptTemplate | None = None,
    max_tokens: int | None = None,
) -> LLMRequest:
    listing = ", ".join(labels)  # the appendix's comma-separated list; the JSON keys are exact
    messages = _template(template, "topics").messages(problem=text, topics=listing)
    schema = {
        "type": "object",
        "properties": {
            "scores": {
                "type": "object",
                "properties": {
                    label: {"type": "number", "minimum": 0, "maximum": 1} for label in labels
                },
                "required": list(labels),
                "additionalProperties": False,
            }
        },
        "required": ["scores"],
        "additionalProperties": False,
    }
    return LLMRequest(
        messages=messages,
        max_tokens=max_tokens or topic_budget(len(labels)),
        json_schema=schema,
    )


def parse_topic_scores(
    text: str, labels: list[str], answer_format: str = "strict"
) -> dict[str, float]:
    """Every label's score: a finite number ≥ 0. A score above 1 is kept on the model's own
    scale: the prompt asks for scores relative to the best and the worst, and the traversal
    min–max normalises each request's scores before τ (a real 135M model answers 0–10 on a
    schema whose [0, 1] bounds llama.cpp's grammar does not enforce; what it ranks is the same).

    ``strict`` (saber's): ``{"scores": {...}}`` with every label and no other. ``reference``
    (the reference code's, the paper's appendix format ``{"Algebra": 1.0, ...}``): a top-level
    object (or one under ``scores``) with any subset of the labels, a missing label scoring 0
    and any other key ignored."""
    data = _strict_json(text)
    if answer_format == "reference":
        if not isinstance(data, dict):
            raise ParseError("expected a JSON object of topic scores")
        wrapped = isinstance(data.get("scores"), dict) and "scores" not in labels
        scores = data["scores"] if wrapped else data
        scores = {label: scores.get(label, 0) for label in labels}
    else:
        if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
            raise ParseError('expected an object {"scores": {...}}')
        scores = data["scores"]
        unknown = sorted(set(scores) - set(labels))
        if unknown:
            raise ParseError(f"unknown labels: {unknown[:5]}")
        missing = [label for label in labels if label not in scores]
        if missing:
            raise ParseError(f"missing labels: {missing[:5]}")
    out = {}
    for label in labels:
        v = scores[label]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ParseError(f"score of {label!r} is not a number: {v!r}")
        if not (math.isfinite(v) and v >= 0.0):
            raise ParseError(f"score of {label!r} is negative or not finite: {v}")
        out[label] = float(v)
    return out


# ----------------------------------------------------------------------------- core idea

SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        "has_core_idea": {"type": "boolean"},
        "core_idea": {"type": "string"},
        # the prompt's "up to three" / "up to six", in the schema too: without a bound a real
        # small model repeats one item until the budget runs out (seen with SmolLM2 on llama.cpp)
        "supporting_ideas": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["has_core_idea", "core_idea", "supporting_ideas", "keywords", "confidence"],
    "additionalProperties": False,
}
SUMMARY_FIELDS = tuple(SUMMARY_SCHEMA["required"])
# the appendix's fields, for a server that constrains the answer under annotations.answer_format:
# reference (the reference code itself asked for free text)
REFERENCE_SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        "noCoreIdea": {"type": "boolean"},
        "coreIdea": {"type": ["string", "null"]},
        "supportingIdeas": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
        "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["noCoreIdea", "coreIdea", "supportingIdeas", "keywords", "confidence"],
    "additionalProperties": False,
}

_EQUATION = re.compile(r"[$\\=^_{}]|\d\s*[-+*/<>]\s*\d|[a-z]\s*[-+*/]\s*\d")
_NOT_IMPERATIVE = re.compile(r"^(we|i|the|this|it|a|an|there)\b", re.IGNORECASE)
# abbreviations whose full stop ends no sentence
_ABBREVIATION = re.compile(r"\b(?:e\.g|i\.e|etc|cf|vs|resp|approx)\.", re.IGNORECASE)


def summary_request(
    problem: str,
    solution: str,
    template: PromptTemplate | None = None,
    max_tokens: int | None = None,
) -> LLMRequest:
    messages = _template(template, "summaries").messages(
        problem=problem, solution=solution, max_words=str(MAX_SUMMARY_WORDS)
    )
    return LLMRequest(
        messages=messages,
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS["summaries"],
        json_schema=SUMMARY_SCHEMA,
    )


def _strings(data: dict, key: str) -> list[str]:
    v = data[key]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ParseError(f"{key} must be a list of strings, not {v!r:.80}")
    return [" ".join(x.split()) for x in v if x.strip()]


def parse_reference_summary(data: object, word_cap: bool) -> tuple[str | None, dict]:
    """``parse_summary`` of the reference code's answer (``extract_ideas.py``): the core idea is
    ``coreIdea`` where ``noCoreIdea`` is there and false, else there is none; the other fields
    are kept where they are readable (``supporingIdeas``, the appendix's spelling, too)."""
    if not isinstance(data, dict):
        data = {}
    core = data.get("coreIdea")
    has = "noCoreIdea" in data and not data["noCoreIdea"] and isinstance(core, str)
    core = " ".join(core.split()) if has else ""
    idea = check_summary(core, strict=False, word_cap=word_cap) if core else None

    def strings(*keys: str) -> list[str]:
        for key in keys:
            v = data.get(key)
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return [" ".join(x.split()) for x in v if x.strip()]
        return []

    conf = data.get("confidence")
    ok_conf = isinstance(conf, int | float) and not isinstance(conf, bool) and 0 <= conf <= 1
    return idea, {
        "has_core_idea": idea is not None,
        "core_idea": idea or "",
        "supporting_ideas": strings("supportingIdeas", "supporingIdeas"),
        "keywords": strings("keywords"),
        "confidence": float(conf) if ok_conf else None,
        "style_flags": summary_style(idea) if idea else [],
    }


def parse_summary(
    text: str, word_cap: bool = True, answer_format: str = "strict"
) -> tuple[str | None, dict]:
    """(the core idea or None, every field of the answer): the signal uses the core idea, the
    annotations store the rest beside it. ``strict``: saber's five fields; ``reference``: the
    reference code's reading (``parse_reference_summary``)."""
    data = _strict_json(text)
    if answer_format == "reference":
        return parse_reference_summary(data, word_cap)
    if not isinstance(data, dict):
        raise ParseError("expected a JSON object with " + ", ".join(SUMMARY_FIELDS))
    missing = [k for k in SUMMARY_FIELDS if k not in data]
    if missing:
        raise ParseError(f"missing fields: {missing}")
    extra = sorted(set(data) - set(SUMMARY_FIELDS))
    if extra:
        raise ParseError(f"unknown fields: {extra[:5]}")
    has = data["has_core_idea"]
    if not isinstance(has, bool):
        raise ParseError(f"has_core_idea is not true or false: {has!r}")
    if not isinstance(data["core_idea"], str):
        raise ParseError(f"core_idea is not a string: {data['core_idea']!r:.80}")
    conf = data["confidence"]
    if isinstance(conf, bool) or not isinstance(conf, int | float) or not 0 <= conf <= 1:
        raise ParseError(f"confidence must be a number in [0, 1], not {conf!r}")
    core = " ".join(data["core_idea"].split())
    if has and core.lower().rstrip(".") in ("", "none"):
        raise ParseError("has_core_idea is true but core_idea is empty")
    idea = check_summary(core, strict=False, word_cap=word_cap) if has else None
    detail = {
        "has_core_idea": has,
        "core_idea": core if has else "",
        "supporting_ideas": _strings(data, "supporting_ideas"),
        "keywords": _strings(data, "keywords"),
        "confidence": float(conf),
        "style_flags": summary_style(idea) if idea else [],
    }
    return idea, detail


def summary_style(s: str) -> list[str]:
    """What the prompt asks of a core idea beyond the hard rules, as flags: a formula, more than
    one sentence, not imperative. The reference accepts such answers (a formula such as "n+1",
    "e.g.", an idea starting "A ..."), so an LLM's answer keeps its idea with its flags."""
    flags = []
    if _EQUATION.search(s):
        flags.append("formula")
    if re.search(r"[.!?]\s+\S", _ABBREVIATION.sub("", s)):
        flags.append("more than one sentence")
    if _NOT_IMPERATIVE.match(s):
        flags.append("not imperative")
    return flags


def check_summary(s: str, strict: bool = True, word_cap: bool = True) -> str:
    """The hard rules of every summary, whichever backend wrote it: not empty, at most
    ``MAX_SUMMARY_WORDS`` words (``word_cap`` False: any length, as the reference keeps).
    ``strict`` (the CPU and synthetic summarizers, which pick among sentences of their own) also
    refuses what ``summary_style`` flags."""
    if not s:
        raise ParseError("empty summary")
    words = s.split()
    if word_cap and len(words) > MAX_SUMMARY_WORDS:
        raise ParseError(f"summary has {len(words)} words (at most {MAX_SUMMARY_WORDS})")
    if strict and (flags := summary_style(s)):
        raise ParseError(f"summary: {', '.join(flags)}: {s!r}")
    return s


# ------------------------------------------------------------------------------ pair judge


def judge_request(
    query: str, first: str, second: str, template: PromptTemplate | None = None
) -> LLMRequest:
    """The ``direct`` judge: the answer is the digit alone (two tokens, constrained to 1 or 2)."""
    chosen = _template(template, "judge:direct")
    messages = chosen.messages(**judge_values(chosen, query, first, second))
    return LLMRequest(
        messages=messages,
        max_tokens=2,
        choices=("1", "2"),
        top_logprobs=5,  # P("1") vs P("2") of the answer token: the judge's P(first better)
    )


def paper_judge_request(
    query: str, first: str, second: str, max_tokens: int, template: PromptTemplate | None = None
) -> LLMRequest:
    """The ``paper`` judge: technique profiles, a comparison with match scores, the decision with
    three ordered tie-breakers, then a final \\boxed{1} or \\boxed{2}. Every item shows its
    problem and solution."""
    chosen = _template(template, "judge:paper")
    messages = chosen.messages(**judge_values(chosen, query, first, second))
    return LLMRequest(
        messages=messages,
        max_tokens=max_tokens,
        all_logprobs=True,  # the boxed digit's alternatives give P(first better)
    )


_JUDGE_ANSWER = re.compile(r"^\s*(?:candidate\s*|sample\s*)?([12])\s*\.?\s*$", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\s*\{\s*(?:\\text\s*\{\s*)?([^{}]*?)\s*\}")


def _p_one(alternatives: dict[str, float] | None) -> float | None:
    """P("1") / (P("1") + P("2")) among a token's alternatives (None if neither is there)."""
    if not alternatives:
        return None
    best = {"1": -math.inf, "2": -math.inf}
    for tok, lp in alternatives.items():
        t = tok.strip()
        if t in best:
            best[t] = max(best[t], lp)
    if best["1"] == -math.inf and best["2"] == -math.inf:
        return None
    m = max(best.values())
    e1, e2 = math.exp(best["1"] - m), math.exp(best["2"] - m)
    return e1 / (e1 + e2)


def judgment_p_first(
    text: str,
    top_logprobs: dict[str, float] | None,
    token_logprobs: list | None,
    boxed_answer: str = "last",
) -> float | None:
    """P(first shown is better) from logprobs: the answer token of a bare answer, or the digit of
    the \\boxed{} the choice was read from (``parse_judgment``'s ``boxed_answer``: the last, or
    the first holding 1 or 2); None where the backend gave no logprobs."""
    if token_logprobs:
        first = _BOXED_ONE_OR_TWO.search(text) if boxed_answer == "first" else None
        pos, boxed_at = 0, first.start() if first else text.rfind("\\boxed")
        digit = text.find("1", boxed_at), text.find("2", boxed_at)
        target = min(d for d in digit if d >= 0) if boxed_at >= 0 and max(digit) >= 0 else -1
        for tok, alternatives in token_logprobs:
            if target >= 0 and pos <= target < pos + len(tok):
                return _p_one(alternatives)
            pos += len(tok)
        if target >= 0:
            return None
    return _p_one(top_logprobs) if _JUDGE_ANSWER.match(text) else None


BOXED_CHOICES = ("last", "first")


# the reference's reading (swiss_tour_run.py: extract_boxed_number): the first \boxed{} that
# holds 1 or 2 alone; a \boxed{} of anything else before it is passed over, not an error
_BOXED_ONE_OR_TWO = re.compile(r"\\boxed\{\s*([12])\s*\}")


# what becomes of a judge's answer cut off at its budget: asked again with twice the budget
# (saber's), or read from its reasoning (the reference's: its vLLM output of a cut-off answer is
# the thinking alone, and the first \boxed{1|2} there is the choice)
CUT_OFF_RULES = ("retry_doubled", "read_reasoning")


def read_cut_off_judgment(reasoning: str | None, text: str) -> int:
    """The first \\boxed{1} or \\boxed{2} of a cut-off answer, its reasoning read first."""
    found = _BOXED_ONE_OR_TWO.search(f"{reasoning or ''}\n{text}")
    if found is None:
        kept = "no reasoning kept" if reasoning is None else f"{len(reasoning):,} characters"
        raise ParseError(f"no \\boxed{{1}} or \\boxed{{2}} in the reasoning ({kept})")
    return int(found.group(1))


def parse_judgment(text: str, boxed_answer: str = "last") -> int:
    """1 or 2: a bare answer ("1", "Candidate 2"), or the last \\boxed{...} of a reasoned
    answer; ``boxed_answer="first"``: the first \\boxed{1} or \\boxed{2}, as the reference code
    reads it (an earlier \\boxed{} of another content is passed over)."""
    m = _JUDGE_ANSWER.match(text)
    if m:
        return int(m.group(1))
    if boxed_answer == "first":
        one_or_two = _BOXED_ONE_OR_TWO.search(text)
        if one_or_two is None:
            raise ParseError(f"no \\boxed{{1}} or \\boxed{{2}} in the answer (ends {text[-80:]!r})")
        return int(one_or_two.group(1))
    boxed = _BOXED.findall(text)
    if not boxed:
        raise ParseError(f"no \\boxed{{1}} or \\boxed{{2}} in the answer (ends {text[-80:]!r})")
    which = boxed[-1]
    got = re.sub(r"^(?:sample|candidate)\s*", "", which.strip(), flags=re.IGNORECASE)
    if got not in ("1", "2"):
        raise ParseError(f"the last boxed answer is {which!r}, not 1 or 2")
    return int(got)


# -------------------------------------------------------------------------- pointwise judge


def pointwise_request(
    query: str, doc: str, top_logprobs: int = 10, template: PromptTemplate | None = None
) -> LLMRequest:
    return LLMRequest(
        messages=_template(template, "pointwise").messages(query=query, candidate=doc),
        max_tokens=1,
        choices=("Yes", "No"),
        top_logprobs=top_logprobs,
    )


def parse_p_yes(top_logprobs: dict[str, float] | None) -> float:
    try:
        return p_yes(top_logprobs)
    except ValueError as exc:
        raise ParseError(str(exc)) from None


# ---------------------------------------------------------------------------- ordinal judge

ORDINAL_MAX = 100  # the paper's ordinal judge: 0-100 after reasoning, in a final \\boxed{}


def ordinal_request(
    query: str,
    candidate: str,
    template: PromptTemplate | None = None,
    max_tokens: int | None = None,
) -> LLMRequest:
    """The ordinal judge of the paper's alternative regimes: one pair on an absolute scale."""
    messages = _template(template, "ordinal").messages(
        target_problem=query, candidate=candidate, max_score=str(ORDINAL_MAX)
    )
    return LLMRequest(messages=messages, max_tokens=max_tokens or DEFAULT_MAX_TOKENS["ordinal"])


def parse_ordinal(text: str) -> int:
    """The integer of the last \\boxed{} (0-100)."""
    boxed = _BOXED.findall(text)
    if not boxed:
        raise ParseError(f"no \\boxed{{N}} score in the answer (ends {text[-80:]!r})")
    last = boxed[-1].strip()
    if not re.fullmatch(r"\d+(?:\.0+)?", last):
        raise ParseError(f"the last boxed answer is {boxed[-1]!r}, not an integer score")
    v = int(float(last))
    if not 0 <= v <= ORDINAL_MAX:
        raise ParseError(f"score {v} is outside the scale 0-{ORDINAL_MAX}")
    return v


# ------------------------------------------------------------------------ math/words split

SEGMENT_SCHEMA = {
    "type": "object",
    "properties": {
        "math": {"type": "array", "items": {"type": "string"}},
        "words": {"type": "string"},
    },
    "required": ["math", "words"],
    "additionalProperties": False,
}


def segment_request(
    text: str, template: PromptTemplate | None = None, max_tokens: int | None = None
) -> LLMRequest:
    """Split a statement whose mathematics is not in LaTeX into its mathematical expressions
    (copied verbatim) and the prose without them."""
    return LLMRequest(
        messages=_template(template, "math_split").messages(statement=text),
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS["math_split"],
        json_schema=SEGMENT_SCHEMA,
    )


def parse_segment(text: str, source: str) -> tuple[list[str], str]:
    """(expressions, words); every expression must occur verbatim in ``source``."""
    data = _strict_json(text)
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("math"), list)
        or not isinstance(data.get("words"), str)
    ):
        raise ParseError('expected an object {"math": [...], "words": "..."}')
    exprs = [e.strip() for e in data["math"] if isinstance(e, str) and e.strip()]
    if len(exprs) != len(data["math"]):
        raise ParseError("every math item must be a non-empty string")
    invented = [e for e in exprs if e not in source]
    if invented:
        raise ParseError(f"expressions not in the statement: {invented[:3]}")
    return exprs, data["words"].strip()


# ------------------------------------------------------------------------------ translation

TRANSLATE_SCHEMA = {
    "type": "object",
    "properties": {"translation": {"type": "string"}},
    "required": ["translation"],
    "additionalProperties": False,
}


def translate_request(
    text: str, target: str, template: PromptTemplate | None = None, max_tokens: int | None = None
) -> LLMRequest:
    return LLMRequest(
        messages=_template(template, "translate").messages(text=text, language=target),
        max_tokens=max_tokens or DEFAULT_MAX_TOKENS["translate"],
        json_schema=TRANSLATE_SCHEMA,
    )


def formulas_of(text: str) -> list[str]:
    return [s.whole for s in LATEX_SPANS.finditer(text)]


def parse_translation(text: str, source: str) -> str:
    data = _strict_json(text)
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("translation"), str)
        or not data["translation"].strip()
    ):
        raise ParseError('expected an object {"translation": "<text>"}')
    out = data["translation"]
    if formulas_of(out) != formulas_of(source):
        raise ParseError(
            f"the translation changed the formulas: {formulas_of(source)[:3]} -> {formulas_of(out)[:3]}"
        )
    return out
