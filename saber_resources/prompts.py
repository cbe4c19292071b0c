"""Versioned prompts and strict parsers for the four LLM tasks.

Written after the structure of the SABER-Math appendix prompts (role, the problem with its worked
solution, the candidates, the exact answer format). The version string of each prompt is part of
every cache key and is stored with every output: change a prompt or a parser, bump its version.
A parser returns the value or raises ``ParseError`` with a precise reason; nothing is guessed.
"""

from __future__ import annotations

import json
import math
import re

from .llm import LLMRequest, p_yes

TOPIC_VERSION = "topic-scores/v1"
SUMMARY_VERSION = "core-idea/v1"
JUDGE_PAPER_VERSION = "pair-judge/paper-v1"  # reasoning, then \boxed{1|2} (the paper's structure)
JUDGE_DIRECT_VERSION = "pair-judge/direct-v1"  # "1" or "2" at once (cheap)
JUDGE_VERSIONS = {"paper": JUDGE_PAPER_VERSION, "direct": JUDGE_DIRECT_VERSION}
POINTWISE_VERSION = "pointwise-yes/v1"
ORDINAL_VERSION = "ordinal-score/v1"  # one query–candidate pair on an absolute 0–5 scale
SEGMENT_VERSION = "math-words-split/v1"  # a statement's formulas vs its prose (non-LaTeX math)
TRANSLATE_VERSION = "translate/v1"

MAX_SUMMARY_WORDS = 30


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

TOPIC_SYSTEM = (
    "You are an expert mathematician who classifies competition mathematics problems by the "
    "mathematical topics their solutions rely on."
)


def problem_text(problem: str, solution: str | None) -> str:
    """How a problem is shown to a model: the statement, then its worked solution."""
    return _problem_block(problem, solution)


def topic_request(text: str, labels: list[str]) -> LLMRequest:
    listing = "\n".join(f"- {label}" for label in labels)
    user = (
        f"{text}\n\n"
        f"Candidate topics:\n{listing}\n\n"
        "Score each candidate topic by how well it describes the mathematics needed to solve this "
        "problem. Give the most relevant topic exactly 1 and the least relevant exactly 0; score the "
        "others in between, relative to these two. Judge the techniques of the solution, not "
        "surface words of the statement.\n"
        'Answer only with JSON of the form {"scores": {"<topic>": <number>, ...}} containing every '
        "listed topic exactly as written and nothing else."
    )
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
        messages=(("system", TOPIC_SYSTEM), ("user", user)),
        max_tokens=64 + 24 * len(labels),
        json_schema=schema,
    )


def parse_topic_scores(text: str, labels: list[str]) -> dict[str, float]:
    data = _strict_json(text)
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
        if not 0.0 <= v <= 1.0:
            raise ParseError(f"score of {label!r} out of range [0, 1]: {v}")
        out[label] = float(v)
    return out


# ----------------------------------------------------------------------------- core idea

SUMMARY_SYSTEM = (
    "You are an expert mathematician who explains the key idea of a solution in one line."
)

SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
    "additionalProperties": False,
}

_EQUATION = re.compile(r"[$\\=^_{}]|\d\s*[-+*/<>]\s*\d|[a-z]\s*[-+*/]\s*\d")
_NOT_IMPERATIVE = re.compile(r"^(we|i|the|this|it|a|an|there)\b", re.IGNORECASE)


def summary_request(problem: str, solution: str) -> LLMRequest:
    user = (
        f"{_problem_block(problem, solution)}\n\n"
        "State the core idea of this solution: the key technique or insight that makes it work, "
        f'as one imperative sentence of at most {MAX_SUMMARY_WORDS} words (for example: "Pair terms '
        'symmetrically and apply the AM-GM inequality to each pair."). Name the idea, not the '
        "computation: no equations, no formulas, no numbers from the problem. If the problem has no "
        'real idea (a routine calculation), answer "none".\n'
        'Answer only with JSON of the form {"summary": "<sentence or none>"}.'
    )
    return LLMRequest(
        messages=(("system", SUMMARY_SYSTEM), ("user", user)),
        max_tokens=96,
        json_schema=SUMMARY_SCHEMA,
    )


def parse_summary(text: str) -> str | None:
    data = _strict_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("summary"), str):
        raise ParseError('expected an object {"summary": "<text>"}')
    s = " ".join(data["summary"].split())
    if s.lower().rstrip(".") == "none":
        return None
    return check_summary(s)


def check_summary(s: str) -> str:
    """The rules every summary obeys, whichever backend wrote it."""
    if not s:
        raise ParseError("empty summary")
    words = s.split()
    if len(words) > MAX_SUMMARY_WORDS:
        raise ParseError(f"summary has {len(words)} words (at most {MAX_SUMMARY_WORDS})")
    if _EQUATION.search(s):
        raise ParseError(f"summary contains an equation or formula: {s!r}")
    if re.search(r"[.!?]\s+\S", s):
        raise ParseError("summary has more than one sentence")
    if _NOT_IMPERATIVE.match(s):
        raise ParseError(f"summary is not imperative (starts with {words[0]!r})")
    return s


# ------------------------------------------------------------------------------ pair judge

JUDGE_SYSTEM = (
    "You are an expert mathematician judging which of two problems is more relevant to a query "
    "problem for a student studying the query's solution method."
)


def judge_request(query: str, first: str, second: str) -> LLMRequest:
    """The ``direct`` judge: the answer is the digit alone (two tokens, constrained to 1 or 2)."""
    user = (
        f"Query problem with its solution:\n{query}\n\n"
        f"Candidate 1:\n{first}\n\n"
        f"Candidate 2:\n{second}\n\n"
        "Which candidate is more mathematically relevant to the query? Judge by the techniques, "
        "the key insight and the structure of the solutions they share with the query, not by "
        "wording, topic labels or surface similarity of the statements. Answer with 1 or 2 only."
    )
    return LLMRequest(
        messages=(("system", JUDGE_SYSTEM), ("user", user)),
        max_tokens=2,
        choices=("1", "2"),
        top_logprobs=5,  # P("1") vs P("2") of the answer token: the judge's P(first better)
    )


PAPER_JUDGE_SYSTEM = (
    "You are an expert mathematician and teacher. You compare problems by the mathematics their "
    "solutions need, not by how they are worded."
)

PAPER_JUDGE_INSTRUCTIONS = """\
A student has just worked through the target problem and its solution. Decide which of the two \
samples would better help them recognise and practise the same way of solving, that is, which \
sample is more mathematically relevant to the target.

Work in three steps.

Step 1, technique profiles. For the target and for each sample write a short profile:
- Topic tags: 2 to 6 short tags for the mathematical areas involved.
- Tools: the theorems, identities, lemmas and standard tools the solution relies on.
- Key moves: the 3 to 8 main steps of the solution in order, each an action (for example \
"reduce modulo 4", "build a bijection", "compare areas").
- Structural signature: 1 to 3 sentences on the shape of the argument, free of the story and \
the numbers.

Step 2, comparison. Compare each sample with the target.
- Technique overlap comes first: how many of the target's essential tools and moves the \
sample's solution also needs.
- Structural alignment comes second and only separates samples whose overlap is similar: do \
the two arguments have the same shape?
- Difficulty is not a criterion: a much easier or much harder problem can be just as relevant.
- Surface similarity counts against a sample, never for it: shared names, setting, story, \
wording or incidental algebra that the solutions do not depend on.

Step 3, decision. Choose the more relevant sample. When the comparison is close, decide by \
the first of these that separates them:
1. the sample whose main technique is the target's main technique;
2. the sample whose sequence of key moves is closer to the target's;
3. the sample that represents the problem the same way (algebraically, geometrically, by \
counting, ...).

Finish with a last line that contains only \\boxed{1} or \\boxed{2}."""


def paper_judge_request(query: str, first: str, second: str, max_tokens: int) -> LLMRequest:
    """The ``paper`` judge: reasoning in three steps (profiles, comparison, ordered tie-breakers),
    the answer in a final \\boxed{1} or \\boxed{2}. Every item shows problem and solution."""
    user = (
        f"Target problem with its solution:\n{query}\n\n"
        f"Sample 1 with its solution:\n{first}\n\n"
        f"Sample 2 with its solution:\n{second}\n\n"
        f"{PAPER_JUDGE_INSTRUCTIONS}"
    )
    return LLMRequest(
        messages=(("system", PAPER_JUDGE_SYSTEM), ("user", user)),
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
    text: str, top_logprobs: dict[str, float] | None, token_logprobs: list | None
) -> float | None:
    """P(first shown is better) from logprobs: the answer token of a bare answer, or the digit of
    the last \\boxed{} of a reasoned one; None where the backend gave no logprobs."""
    if token_logprobs:
        pos, boxed_at = 0, text.rfind("\\boxed")
        digit = text.find("1", boxed_at), text.find("2", boxed_at)
        target = min(d for d in digit if d >= 0) if boxed_at >= 0 and max(digit) >= 0 else -1
        for tok, alternatives in token_logprobs:
            if target >= 0 and pos <= target < pos + len(tok):
                return _p_one(alternatives)
            pos += len(tok)
        if target >= 0:
            return None
    return _p_one(top_logprobs) if _JUDGE_ANSWER.match(text) else None


def parse_judgment(text: str) -> int:
    """1 or 2: a bare answer ("1", "Candidate 2"), or the last \\boxed{...} of a reasoned answer."""
    m = _JUDGE_ANSWER.match(text)
    if m:
        return int(m.group(1))
    boxed = _BOXED.findall(text)
    if not boxed:
        raise ParseError(f"no \\boxed{{1}} or \\boxed{{2}} in the answer (ends {text[-80:]!r})")
    last = re.sub(r"^(?:sample|candidate)\s*", "", boxed[-1].strip(), flags=re.IGNORECASE)
    if last not in ("1", "2"):
        raise ParseError(f"the last boxed answer is {boxed[-1]!r}, not 1 or 2")
    return int(last)


# -------------------------------------------------------------------------- pointwise judge

POINTWISE_SYSTEM = (
    "You are an expert mathematician assessing the relevance of a problem to a query problem."
)


def pointwise_request(query: str, doc: str, top_logprobs: int = 10) -> LLMRequest:
    user = (
        f"Query:\n{query}\n\nCandidate:\n{doc}\n\n"
        "Is the candidate relevant to the query, that is, would it help someone who must solve the "
        "query because it relies on the same mathematical technique or insight? Answer Yes or No."
    )
    return LLMRequest(
        messages=(("system", POINTWISE_SYSTEM), ("user", user)),
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

ORDINAL_SCALE = (0, 1, 2, 3, 4, 5)
ORDINAL_INSTRUCTIONS = """\
Rate how mathematically relevant the candidate is to the target, on this scale:
5 - the same main technique and the same shape of argument;
4 - the same main technique, a different shape of argument;
3 - shares an essential tool or key move, but not the main technique;
2 - the same area, with only incidental tools in common;
1 - only surface similarity (setting, story, wording);
0 - unrelated mathematics.
Difficulty is not a criterion. Judge the solutions, not the wording of the statements.
Answer only with JSON of the form {"score": <0-5>}."""


def ordinal_request(query: str, candidate: str) -> LLMRequest:
    """The ordinal judge of the paper's alternative regimes: one pair on an absolute scale."""
    user = (
        f"Target problem with its solution:\n{query}\n\n"
        f"Candidate problem with its solution:\n{candidate}\n\n"
        f"{ORDINAL_INSTRUCTIONS}"
    )
    schema = {
        "type": "object",
        "properties": {"score": {"type": "integer", "enum": list(ORDINAL_SCALE)}},
        "required": ["score"],
        "additionalProperties": False,
    }
    return LLMRequest(
        messages=(("system", PAPER_JUDGE_SYSTEM), ("user", user)),
        max_tokens=16,
        json_schema=schema,
    )


def parse_ordinal(text: str) -> int:
    data = _strict_json(text)
    if not isinstance(data, dict) or "score" not in data:
        raise ParseError('expected an object {"score": <0-5>}')
    v = data["score"]
    if isinstance(v, bool) or not isinstance(v, int | float) or v != int(v):
        raise ParseError(f"score is not an integer: {v!r}")
    if int(v) not in ORDINAL_SCALE:
        raise ParseError(f"score {v} is outside the scale 0-5")
    return int(v)


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


def segment_request(text: str) -> LLMRequest:
    """Split a statement whose mathematics is not in LaTeX into its mathematical expressions
    (copied verbatim) and the prose without them."""
    user = (
        f"Statement:\n{text}\n\n"
        "List every mathematical expression of the statement (formulas, equations, numbers with "
        "operators, variables and their relations), each copied exactly as it appears, in order. "
        "Then give the statement's words with those expressions removed.\n"
        'Answer only with JSON of the form {"math": ["<expression>", ...], "words": "<text>"}.'
    )
    return LLMRequest(
        messages=(("system", "You separate mathematical notation from prose."), ("user", user)),
        max_tokens=1024,
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

# A formula span: $$…$$, $…$, \[…\] or \(…\) (the retrievers' tokenisers use the same one).
LATEX_SPAN = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\[(.+?)\\\]|\\\((.+?)\\\)", re.DOTALL)
TRANSLATE_SCHEMA = {
    "type": "object",
    "properties": {"translation": {"type": "string"}},
    "required": ["translation"],
    "additionalProperties": False,
}


def translate_request(text: str, target: str) -> LLMRequest:
    user = (
        f"Translate this mathematics problem into {target}. Copy every LaTeX formula ($...$, $$...$$, "
        "\\(...\\), \\[...\\]) exactly as it is, character for character; translate only the words.\n\n"
        f"{text}\n\n"
        'Answer only with JSON of the form {"translation": "<text>"}.'
    )
    return LLMRequest(
        messages=(("system", "You are a precise translator of mathematical text."), ("user", user)),
        max_tokens=2048,
        json_schema=TRANSLATE_SCHEMA,
    )


def formulas_of(text: str) -> list[str]:
    return [m.group(0) for m in LATEX_SPAN.finditer(text)]


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
