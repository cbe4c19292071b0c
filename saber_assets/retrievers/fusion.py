"""Rank fusion over registered retrievers: reciprocal rank fusion and the min-max weighted sum
in numpy; ranx's other methods (CombMNZ, ISR, Borda, …) through ranx.

Why not ranx for all: its fusion builds Numba typed dictionaries, which compile in every process
(30 s of the sample build's first fusion run, against 0.5–2 s for each later domain in the same
process; every run worker of a deployment is a fresh process), while a query's fusion over
scores that every component gives every document is a sort and a sum. ``rrf`` and ``wsum`` give
ranx's scores exactly where a component has no tied scores (tests/test_retrievers.py checks
against ranx itself). Tied documents take consecutive ranks in the order given: ranx's order
for them is Numba's quicksort's (not stable past a few documents), so its RRF varied with the
library's sort."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from saber_assets.retrievers.base import Kind, scores_key


def given_order_ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks by score, highest first; tied scores in the order given."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = np.arange(1, len(order) + 1)
    return ranks


def rrf(per_component: list[np.ndarray], k: float = 60) -> np.ndarray:
    """Reciprocal rank fusion (Cormack et al. 2009): Σ 1 / (k + rank)."""
    total = np.zeros(len(per_component[0]))
    for scores in per_component:
        total = total + 1.0 / (k + given_order_ranks(scores))
    return total


def min_max(scores: np.ndarray) -> np.ndarray:
    """Scores scaled to [0, 1] as ranx's ``min-max`` norm does (a constant list gives zeros)."""
    s = np.asarray(scores, dtype=np.float64)
    return (s - s.min()) / max(float(s.max() - s.min()), 1e-9)


def wsum(per_component: list[np.ndarray], weights: list[float]) -> np.ndarray:
    """Weighted sum of min-max normalised scores."""
    if len(weights) != len(per_component):
        raise ValueError(f"wsum needs one weight per fused retriever: {len(weights)} weights "
                         f"for {len(per_component)} retrievers")  # fmt: skip
    total = np.zeros(len(per_component[0]))
    for w, scores in zip(weights, per_component, strict=True):
        total = total + float(w) * min_max(scores)
    return total


NATIVE = {"rrf": rrf, "wsum": wsum}


@dataclass(frozen=True)
class SavedScores:
    """A component's scores for one request, read from its own run: the scores, the latency its
    run measured for them and the documents it could not judge."""

    scores: np.ndarray
    latency_ms: float
    doc_failures: int = 0


class FusionRetriever:
    """Fuses its components' scores for each request. A component's scores come from its saved
    run where ``reuse`` gave them (looked up by ``scores_key``), else from the component, fitted
    (``fit_corpus`` / ``fit_candidates``) only when first asked: a component whose every score was
    read is never fitted. After each ``score``: ``last_saved_ms`` (the latency the read scores
    cost their own runs, which the fusion's latency includes), ``last_failed`` (documents the
    components could not judge) and ``last_reused`` (components read, not run)."""

    def __init__(
        self, name: str, components: list, method: str = "rrf", params: dict | None = None
    ) -> None:
        if len(components) < 2:
            raise ValueError("fusion needs at least two retrievers")
        self.name, self.components, self.method, self.params = (
            name,
            components,
            method,
            params or {},
        )
        self.saved: list[Mapping[bytes, SavedScores]] = [{} for _ in components]
        self._fits: list[tuple[str, list[str]]] = []
        self._fitted = [True] * len(components)
        self.last_saved_ms, self.last_failed, self.last_reused = 0.0, 0, 0

    def reuse(self, saved: list[Mapping[bytes, SavedScores]]) -> None:
        """Each component's saved scores by request (``scores_key``), in component order."""
        if len(saved) != len(self.components):
            raise ValueError(f"{len(saved)} saved runs for {len(self.components)} components")
        self.saved = list(saved)

    def fit_corpus(self, all_docs: list[str]) -> None:
        self._fits = []  # another document set: what was fitted before is not this one's
        self._defer("fit_corpus", all_docs)

    def fit_candidates(self, docs: list[str]) -> None:
        self._defer("fit_candidates", docs)

    def _defer(self, method: str, docs: list[str]) -> None:
        self._fits = [f for f in self._fits if f[0] != method] + [(method, docs)]
        self._fitted = [False] * len(self.components)

    def _ready(self, i: int):
        """Component ``i``, fitted as the evaluation fitted the fusion."""
        c = self.components[i]
        if not self._fitted[i]:
            for method, docs in self._fits:
                if hasattr(c, method):
                    getattr(c, method)(docs)
            self._fitted[i] = True
        return c

    def _fuse(self, per_component: list[np.ndarray]) -> np.ndarray:
        if self.method in NATIVE:
            return NATIVE[self.method](per_component, **self.params)
        return ranx_fuse(per_component, self.method, self.params)

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        key = scores_key(query, docs) if any(self.saved) else b""
        per_component, self.last_saved_ms, self.last_failed, self.last_reused = [], 0.0, 0, 0
        for i, saved in enumerate(self.saved):
            hit = saved.get(key)
            if hit is not None and len(hit.scores) == len(docs):
                per_component.append(hit.scores)
                self.last_saved_ms += hit.latency_ms
                self.last_failed += hit.doc_failures
                self.last_reused += 1
                continue
            c = self._ready(i)
            per_component.append(np.asarray(c.score(query, docs)))
            self.last_failed += int(getattr(c, "last_failed", 0))
        return self._fuse(per_component)

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        return self._fuse(
            [
                np.asarray(self._ready(i).corpus_scores(query, all_docs))
                for i in range(len(self.components))
            ]
        )


def ranx_fuse(per_component: list[np.ndarray], method: str, params: dict | None) -> np.ndarray:
    """One query's fused scores by ranx's ``method`` (its ``min-max`` norm for ``wsum``)."""
    from numba.core.errors import NumbaTypeSafetyWarning
    from ranx import Run, fuse

    n = len(per_component[0])
    runs = [
        Run({"q": {str(i): float(s) for i, s in enumerate(scores)}}) for scores in per_component
    ]
    with warnings.catch_warnings():
        # ranx's parallel RRF kernel indexes a list by its prange counter (uint64 → int64
        # when Numba compiles it): lossless below 2**63 queries, so not the user's concern
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        fused = fuse(
            runs=runs,
            method=method,
            params=params or None,
            norm="min-max" if method == "wsum" else None,
        )
    out = np.full(n, -np.inf)
    for doc, s in fused.to_dict()["q"].items():
        out[int(doc)] = s
    missing = ~np.isfinite(out)
    if missing.any():  # a document no component returned ranks last
        out[missing] = (out[~missing].min() if (~missing).any() else 0.0) - 1.0
    return out


KINDS = (Kind("fusion", FusionRetriever, fuses=True),)
