"""The `synthetic` annotation backend: deterministic topics and summaries without any model.

For scale rehearsals (``perf/scale.py``): annotating 283K problems with the CPU stand-ins
costs hours of MiniLM inference that says nothing about the platform's own speed. These tasks
answer instantly, from a hash of the text they are asked about, with the shape of real
annotations — a skewed topic distribution (some topics far more popular than others), one to a
few most-specific topics per problem at varying depths, and ≤ 30-word imperative summaries over
a technique vocabulary — so that every later stage (IC, signals, thresholds, candidates) sees
data of realistic structure. Outputs are labelled backend ``synthetic``: nobody can mistake them
for a model's. The pair judge stays the CPU judge (the tournament is exercised for real).

The topic scorer decides per request, from hash(text, labels): one label gets 1 and the rest 0;
with probability ``P_SECOND`` a second label also gets 1 (a problem with two topics); with
probability ``P_STOP`` the last label wins alone — below the root that label is the parent
competitor, so the traversal stops there (a problem annotated at an inner node); at the root
the scorer cannot tell, and the last first-level topic gets that share. The winner is
drawn with weight exp(SKEW·z), z ~ N(0, 1) fixed per label title: the skew.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence

import numpy as np

from saber_resources.core_ideas import MATH_SPAN, TECHNIQUES
from saber_resources.llm_tasks import Outcome, TaskStats
from saber_resources.prompts import check_summary

P_SECOND = 0.12
P_STOP = 0.3
SKEW = 2.0
TECHNIQUE_SKEW = 0.5  # techniques are less concentrated than topics

_TECHNIQUES = [name for _, name in TECHNIQUES]
_VERBS = ["Use", "Apply", "Combine", "Reduce the problem with", "Set up", "Exploit"]
_WORD = re.compile(r"[a-z]{3,}")


def _rng(*parts: str) -> np.random.Generator:
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=16).digest()
    return np.random.default_rng(int.from_bytes(digest, "little"))


@functools.lru_cache(maxsize=1 << 16)
def label_weight(label: str) -> float:
    """A fixed popularity weight per topic title (log-normal: a few topics dominate)."""
    base = label.rsplit(" (", 1)[0]  # "Area (2)" and "Area (general)" share Area's weight
    return float(np.exp(SKEW * _rng("weight", base).standard_normal()))


class SyntheticTopicScorer:
    backend, model, version = "synthetic", "hash", "synthetic-topic/v1"

    def __init__(self) -> None:
        self.stats = TaskStats()

    def text_for(self, problem: str, solution: str) -> str:
        return problem

    def scores(self, text: str, labels: list[str]) -> dict[str, float]:
        rng = _rng("topic", text, *labels)
        out = dict.fromkeys(labels, 0.0)
        if len(labels) > 1 and rng.random() < P_STOP:
            out[labels[-1]] = 1.0
            return out
        w = np.array([label_weight(x) for x in labels])
        first = int(rng.choice(len(labels), p=w / w.sum()))
        out[labels[first]] = 1.0
        if len(labels) > 2 and rng.random() < P_SECOND:
            w[first] = 0.0
            out[labels[int(rng.choice(len(labels), p=w / w.sum()))]] = 1.0
        return out

    def score_batch(
        self, items: Sequence[tuple[str, list[str]]]
    ) -> list[Outcome[dict[str, float]]]:
        self.stats.calls += len(items)
        return [Outcome(self.scores(t, labels)) for t, labels in items]


def synthetic_summary(problem: str) -> str:
    """One to three techniques (popular ones more often) applied to a few of the problem's own
    words, as one imperative sentence of at most 30 words: summaries overlap through shared
    techniques, as real ones do, and otherwise little."""
    rng = _rng("summary", problem)
    w = np.array([label_weight(t) for t in _TECHNIQUES]) ** TECHNIQUE_SKEW
    k = int(rng.integers(1, 4))
    names = [_TECHNIQUES[i] for i in rng.choice(len(w), size=k, replace=False, p=w / w.sum())]
    joined = names[0] if k == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    verb = _VERBS[int(rng.integers(len(_VERBS)))]
    words = list(dict.fromkeys(_WORD.findall(MATH_SPAN.sub(" ", problem).lower())))
    take = min(len(words), int(rng.integers(3, 6)))
    goal = " ".join(words[i] for i in sorted(rng.choice(len(words), take, replace=False)))
    return check_summary(f"{verb} {joined} on the {goal}." if goal else f"{verb} {joined}.")


class SyntheticSummarizer:
    backend, model, version = "synthetic", "hash", "synthetic-summary/v1"

    def __init__(self) -> None:
        self.stats = TaskStats()

    def summarize_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[str | None]]:
        self.stats.calls += len(items)
        return [Outcome(synthetic_summary(p)) for p, _ in items]
