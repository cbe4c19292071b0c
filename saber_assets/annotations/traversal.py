"""Topic annotation by top-down ontology traversal (DESIGN.md, annotations).

Start at the root; the scorer scores a node's children, plus the node itself as a competitor
except at the root, in [0, 1] (most relevant 1, least 0); children scoring >= tau are kept and
recursed into; at the end only the most specific kept nodes remain (ancestors are dropped). The
requests of one tree level across all problems go to the scorer as one batch.

A request that fails (its answers never parsed) prunes only its branch, as the reference does:
the node it asked about stays kept (now the most specific of its branch), the rest of the
problem's traversal goes on, and the failure is recorded (``ProblemTopics.pruned``). Only a
failed root request leaves the problem without topics (``failed``).

Scores are normalised here, for every backend alike, before tau is applied: min–max over the
scores of one request (the parent competitor included), so the best candidate has 1 and the
worst 0 — exactly what the prompt asks for, whatever the model actually returned (an LLM whose
best child gets 0.7 still descends; the CPU scorer's raw cosines get the same treatment). A
request whose scores are all equal carries no preference: all 1 when that value is positive (all
equally relevant), all 0 when it is 0 (none is).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from saber_resources.llm_tasks import TopicScorer


def normalise_scores(scores: dict[str, float]) -> dict[str, float]:
    """Min–max over one request's scores (see the module docstring for ties)."""
    values = np.array(list(scores.values()), dtype=np.float64)
    lo, hi = values.min(), values.max()
    if hi - lo < 1e-9:
        scaled = np.full_like(values, 1.0 if hi > 0 else 0.0)
    else:
        scaled = (values - lo) / (hi - lo)
    return dict(zip(scores, scaled.tolist(), strict=True))


@dataclass
class ProblemTopics:
    topics: list[int] = field(default_factory=list)  # most specific kept tree nodes, preorder
    kept: set[int] = field(default_factory=set)
    calls: int = 0
    failed: bool = False  # the root request failed: no topics at all
    # (node, error) of each failed request below the root: its branch pruned, the node kept
    pruned: list[tuple[int, str]] = field(default_factory=list)
    error: str | None = None  # the first failed request's error and raw answer
    raw: str | None = None


def request_labels(children: list[int], labels: Sequence[str], parent: int | None) -> list[str]:
    """The labels of one request: the children's, then the parent's (as competitor), all unique."""
    out: list[str] = []
    seen: Counter[str] = Counter()
    for node in children:
        base = labels[node]
        seen[base] += 1
        out.append(base if seen[base] == 1 else f"{base} ({seen[base]})")
    if parent is not None:
        base = labels[parent]
        out.append(base if base not in out else f"{base} (general)")
    return out


def traverse(
    texts: Sequence[str],
    children: Sequence[list[int]],
    labels: Sequence[str],
    scorer: TopicScorer,
    tau: float,
    root: int = 0,
    rescale: bool = True,
) -> tuple[list[ProblemTopics], list[dict]]:
    """Annotate every text; returns per-problem results and per-level statistics. ``rescale``
    False compares the scores as the scorer gave them with tau (the reference code's; the
    paper's text min–max rescales them)."""
    results = [ProblemTopics() for _ in texts]
    frontier = [(p, root) for p in range(len(texts))]
    levels: list[dict] = []
    depth = 0
    while frontier:
        items, meta = [], []
        for p, node in frontier:
            kids = children[node]
            if not kids:
                continue
            req_labels = request_labels(kids, labels, None if node == root else node)
            items.append((texts[p], req_labels))
            meta.append((p, node, kids, req_labels))
        if not items:
            break
        outcomes = scorer.score_batch(items)
        nxt = []
        for (p, node, kids, req_labels), out in zip(meta, outcomes, strict=True):
            res = results[p]
            res.calls += 1
            if not out.ok:
                if res.error is None:
                    res.error, res.raw = out.error, out.raw
                if node == root:
                    res.failed = True
                else:
                    res.pruned.append((node, out.error or "failed"))
                continue
            scores = normalise_scores(out.value) if rescale else dict(out.value)
            # the parent competitor is last: it competes but is never kept
            for k, lab in zip(kids, req_labels, strict=False):
                if scores[lab] >= tau:
                    res.kept.add(k)
                    nxt.append((p, k))
        levels.append(
            {
                "level": depth,
                "requests": len(items),
                "labels": sum(len(x[1]) for x in items),
                "kept": len(nxt),
                "pruned": sum(not o.ok for o in outcomes),
            }
        )
        frontier = nxt
        depth += 1
    for res in results:
        # most specific: a kept node none of whose children is kept
        res.topics = sorted(k for k in res.kept if not any(c in res.kept for c in children[k]))
    return results, levels
