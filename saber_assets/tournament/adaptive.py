"""Adaptive pairing (beyond the paper): pair candidates whose current Bradley–Terry strengths are
closest, i.e. whose outcome is most uncertain, never repeating a pair.

Like Swiss, but sorted by the BT estimate instead of the coarse win count, and the round can be
limited to the ``budget`` most uncertain pairs (P(win) closest to 1/2), so calls go where the
ranking is still in doubt.
"""

from __future__ import annotations

import numpy as np

from saber_assets.tournament.swiss import greedy_closest


def pair_round_adaptive(
    strengths: np.ndarray,
    played: set[frozenset[int]],
    rng: np.random.Generator,
    budget: int | None = None,
) -> list[tuple[int, int]]:
    strengths = np.asarray(strengths, dtype=np.float64)
    order = rng.permutation(len(strengths))  # random tie-breaking among equal strengths
    order = order[np.argsort(strengths[order], kind="stable")]
    pairs = greedy_closest(order, strengths[order], played)
    if budget is not None and budget < len(pairs):
        gaps = np.array([abs(strengths[a] - strengths[b]) for a, b in pairs])
        keep = np.argsort(gaps, kind="stable")[:budget]
        pairs = [pairs[k] for k in sorted(keep)]
    return pairs
