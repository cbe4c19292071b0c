"""CPU implementations of the four tasks: deterministic, no LLM, labelled ``backend=cpu``.

They make the embedded default run end to end on a laptop. They are honest stand-ins, not judges:
- topics: cosine between the problem statement and the topic titles (MiniLM); the traversal
  normalises them like any backend's scores (min-max per request);
- summary: the goal, objects and method of ``core_ideas.core_idea`` in one imperative sentence,
  or None for a solution without reasoning;
- pair and pointwise judge: ``EvidenceScorer`` — MiniLM cosine of problem + solution, named
  technique overlap of the solutions, and the pipeline's topic / summary signals, in a stated,
  versioned formula; P(first better) from the margin. MiniLM is the judge's and annotator's model
  only: the default registry's dense retrievers use e5, so the judge is not a contestant;
- the two-stage retriever's CPU re-ranker: cosine with a retriever-side embedder (e5).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from saber_resources.core_ideas import core_idea, named_techniques
from saber_resources.embeddings import Embedder
from saber_resources.llm_tasks import Outcome, TaskStats
from saber_resources.prompts import check_summary, problem_text
from saber_resources.titles import humanize_title


class _CPUTask:
    backend = "cpu"

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model = embedder.model_id
        self.stats = TaskStats()


class CPUTopicScorer(_CPUTask):
    version = "cpu-topic-cosine/v2"

    def text_for(self, problem: str, solution: str) -> str:
        # The statement only: embedding whole solutions costs ~10x more on CPU for little gain here.
        return problem

    def score_batch(
        self, items: Sequence[tuple[str, list[str]]]
    ) -> list[Outcome[dict[str, float]]]:
        if not items:
            return []
        texts = self.embedder.encode([t for t, _ in items])
        all_labels = list(dict.fromkeys(label for _, labels in items for label in labels))
        label_vecs = dict(
            zip(
                all_labels,
                self.embedder.encode([humanize_title(x) for x in all_labels]),
                strict=True,
            )
        )
        out = []
        for vec, (_, labels) in zip(texts, items, strict=True):
            # cosines in [-1, 1] mapped to [0, 1]; the traversal normalises per request
            sims = np.array([(1.0 + float(label_vecs[x] @ vec)) / 2 for x in labels])
            out.append(Outcome(dict(zip(labels, sims.round(6).tolist(), strict=True))))
        return out

    def score(self, text: str, labels: list[str]) -> dict[str, float]:
        return self.score_batch([(text, labels)])[0].value  # type: ignore[return-value]


class CPUSummarizer(_CPUTask):
    """The core idea built from the problem's goal and objects and the solution's named
    techniques or operations (``core_ideas.core_idea``); None only for a solution without
    reasoning."""

    version = "cpu-core-idea/v2"

    def __init__(self) -> None:
        self.model = "technique-catalogue"
        self.stats = TaskStats()

    def summarize_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[str | None]]:
        return [Outcome(self.summarize(p, s)) for p, s in items]

    def summarize(self, problem: str, solution: str) -> str | None:
        idea = core_idea(problem, solution)
        return None if idea is None else check_summary(idea)


def _tie_break(a: str, b: str) -> int:
    ha = hashlib.blake2b(a.encode(), digest_size=8).digest()
    hb = hashlib.blake2b(b.encode(), digest_size=8).digest()
    return 1 if ha <= hb else 2


def techniques_of(text: str) -> frozenset[str]:
    """The named techniques (``core_ideas.TECHNIQUES``) a text mentions."""
    return frozenset(named_techniques(text))


def split_problem_text(text: str) -> tuple[str, str]:
    """(problem, solution) back from ``prompts.problem_text``."""
    head, sep, tail = text.partition("\n\nSolution:\n")
    return head.removeprefix("Problem:\n"), tail if sep else ""


class EvidenceScorer:
    """The CPU stand-in judge's relevance of a candidate to a query (formula ``cpu-evidence/v1``):

        s = 0.45·e + 0.25·k + 0.20·t + 0.10·u
        e = cosine of MiniLM embeddings of problem + solution (the first ``max_chars`` = 400
            characters: the statement and the solution's opening, within one short window)
        k = Jaccard of the named techniques (``core_ideas.TECHNIQUES``) the two solutions mention
            (0 if none)
        t = the pipeline's topic signal (BMA of Lin over the two problems' topics), 0 if unknown
        u = the pipeline's summary signal (Jaccard of the core-idea summaries), 0 if unknown

    and P(first better) = sigmoid((s_first − s_second) / 0.05). MiniLM is the annotator's and
    the judge's model; no retriever registered by default uses it, and none reads this text view.
    ``evidence`` maps (query text, candidate text) to (t, u); the tournament fills it from the
    candidates table.
    """

    FORMULA = "s=0.45e+0.25k+0.20t+0.10u; P(first)=sigmoid(ds/0.05)"
    WEIGHTS = (0.45, 0.25, 0.20, 0.10)
    TEMPERATURE = 0.05

    def __init__(
        self, embedder: Embedder, max_chars: int = 400, weights: tuple | None = None
    ) -> None:
        self.embedder = embedder
        self.max_chars = max_chars
        # other weights make another judge (the robustness check's: no topic, no summary term)
        self.weights = tuple(weights) if weights is not None else self.WEIGHTS
        self.evidence: dict[tuple[str, str], tuple[float, float]] = {}
        self._techniques: dict[str, frozenset[str]] = {}  # a text is judged in many pairs

    def scores(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """s for each (query text, candidate text)."""
        if not pairs:
            return np.zeros(0)
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        vecs = dict(
            zip(texts, self.embedder.encode([t[: self.max_chars] for t in texts]), strict=True)
        )
        for t in texts:
            if t not in self._techniques:
                self._techniques[t] = techniques_of(split_problem_text(t)[1])
        tech = self._techniques
        we, wk, wt, wu = self.weights
        out = np.empty(len(pairs))
        for n, (q, c) in enumerate(pairs):
            e = float(vecs[q] @ vecs[c])
            union = tech[q] | tech[c]
            k = len(tech[q] & tech[c]) / len(union) if union else 0.0
            t, u = self.evidence.get((q, c), (0.0, 0.0))
            out[n] = we * e + wk * k + wt * t + wu * u
        return out


class CPUPairJudge(_CPUTask):
    """The CPU stand-in pair judge: the candidate with the higher ``EvidenceScorer`` relevance
    wins; equal scores are broken by a content hash, never by position."""

    version = "cpu-evidence-judge/v2"  # v2: core_ideas' technique catalogue

    def __init__(self, embedder: Embedder, weights: tuple | None = None) -> None:
        super().__init__(embedder)
        self.scorer = EvidenceScorer(embedder, weights=weights)
        self.formula = EvidenceScorer.FORMULA
        if weights is not None:
            we, wk, wt, wu = weights
            self.formula = f"s={we:g}e+{wk:g}k+{wt:g}t+{wu:g}u; P(first)=sigmoid(ds/0.05)"
            self.version = f"cpu-evidence-judge/v2:{we:g},{wk:g},{wt:g},{wu:g}"

    @property
    def evidence(self) -> dict[tuple[str, str], tuple[float, float]]:
        return self.scorer.evidence

    def text_for(self, problem: str, solution: str) -> str:
        return problem_text(problem, solution)

    def compare_batch(
        self, items: Sequence[tuple[str, str, str]], sample: int = 0, temperature: float = 0.7
    ) -> list[Outcome[int]]:
        """Deterministic: every ``sample`` gets the same answer (no sampling to vary)."""
        if not items:
            return []
        s = self.scorer.scores([(q, x) for q, a, b in items for x in (a, b)]).reshape(-1, 2)
        out = []
        for (_, a, b), (sa, sb) in zip(items, s, strict=True):
            p = 1.0 / (1.0 + np.exp(-(sa - sb) / EvidenceScorer.TEMPERATURE))
            value = 1 if sa > sb else 2 if sb > sa else _tie_break(a, b)
            if sa == sb:
                p = 0.5
            out.append(Outcome(value, p_first=float(p)))
        return out

    def compare(self, query: str, a: str, b: str) -> int:
        return self.compare_batch([(query, a, b)])[0].value  # type: ignore[return-value]


class CPUPointwiseJudge(_CPUTask):
    """P(yes) = the ``EvidenceScorer`` relevance clipped to [0, 1]."""

    version = "cpu-evidence-pointwise/v2"

    def __init__(self, embedder: Embedder) -> None:
        super().__init__(embedder)
        self.scorer = EvidenceScorer(embedder)

    def p_yes_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[float]]:
        return [Outcome(float(np.clip(v, 0, 1))) for v in self.scorer.scores(list(items))]

    def p_yes(self, query: str, doc: str) -> float:
        return self.p_yes_batch([(query, doc)])[0].value  # type: ignore[return-value]


class CPUOrdinalJudge(_CPUTask):
    """The ordinal judge's 0–100 scale as ``EvidenceScorer`` relevance in steps of 5, clipped:
    coarse on purpose, like an absolute-scale judge (LLMs answer round numbers; many pairs share
    a score). ``scorer`` may be the pair judge's, so the evidence the tournament fills in is
    shared."""

    version = "cpu-evidence-ordinal/v3"

    def __init__(self, embedder: Embedder, scorer: EvidenceScorer | None = None) -> None:
        super().__init__(embedder)
        self.scorer = scorer or EvidenceScorer(embedder)

    def text_for(self, problem: str, solution: str) -> str:
        return problem_text(problem, solution)

    def score_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[int]]:
        s = self.scorer.scores(list(items))
        return [Outcome(int(5 * np.clip(np.rint(20 * v), 0, 20))) for v in s]


class CPUCosineReranker(_CPUTask):
    """The two-stage retriever's re-ranker on the CPU backend: P(yes) = (1 + cosine) / 2 of the
    query's and the document's embeddings with a retriever-side model (never the judge's)."""

    version = "cpu-cosine-rerank/v1"

    def __init__(self, query_embedder: Embedder, doc_embedder: Embedder) -> None:
        super().__init__(doc_embedder)
        self.query_embedder = query_embedder

    def p_yes_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[float]]:
        if not items:
            return []
        queries = list(dict.fromkeys(q for q, _ in items))
        docs = list(dict.fromkeys(d for _, d in items))
        qv = dict(zip(queries, self.query_embedder.encode(queries), strict=True))
        dv = dict(zip(docs, self.embedder.encode(docs), strict=True))
        return [Outcome(float(np.clip((1 + qv[q] @ dv[d]) / 2, 0, 1))) for q, d in items]


class CPUTranslator:
    """No model, no translation: returns the text unchanged (labelled, so nobody mistakes it)."""

    backend, model, version = "cpu", "identity", "cpu-identity/v1"

    def __init__(self) -> None:
        self.stats = TaskStats()

    def translate_batch(self, items: Sequence[tuple[str, str]]) -> list[Outcome[str]]:
        return [Outcome(text) for text, _ in items]
