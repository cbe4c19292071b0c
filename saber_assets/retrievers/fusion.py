"""Rank fusion over registered retrievers through ranx (reciprocal rank fusion, weighted sum, …)."""

from __future__ import annotations

import warnings

import numpy as np

from saber_assets.retrievers.base import Kind


class FusionRetriever:
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

    def _fuse(self, per_component: list[np.ndarray]) -> np.ndarray:
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
                method=self.method,
                params=self.params or None,
                norm="min-max" if self.method == "wsum" else None,
            )
        out = np.full(n, -np.inf)
        for doc, s in fused.to_dict()["q"].items():
            out[int(doc)] = s
        missing = ~np.isfinite(out)
        if missing.any():  # a document no component returned ranks last
            out[missing] = (out[~missing].min() if (~missing).any() else 0.0) - 1.0
        return out

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        return self._fuse([np.asarray(c.score(query, docs)) for c in self.components])

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        return self._fuse([np.asarray(c.corpus_scores(query, all_docs)) for c in self.components])


KINDS = (Kind("fusion", FusionRetriever, fuses=True),)
