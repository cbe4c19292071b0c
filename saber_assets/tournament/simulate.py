"""A pure simulation driver over the same pairing and estimation code the engine uses.

``estimate(policy, n, judge, calls, seed)`` runs ``policy`` for one query of ``n`` candidates:
each round's pairs come from ``engine.round_pairs`` with the engine's own seeded generators (the
query id is ``SIM_QUERY``), the display order is drawn the engine's way, ``judge(first, second)``
(two int arrays, one batch per round) returns P(first is better) — a binary judge returns 0.0 /
1.0 — and exactly ``calls`` judgments are asked (the last round truncated). Returns strengths,
higher = better.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from saber_assets.ratings.bradley_terry import DEFAULT_PRIOR, Prior, fit
from saber_assets.ratings.soft import estimate_strengths
from saber_assets.tournament.engine import Standing, round_pairs, round_rng

SIM_QUERY = "sim"
Judge = Callable[[np.ndarray, np.ndarray], np.ndarray]


def estimate(
    policy: str,
    n: int,
    judge: Judge,
    calls: int,
    seed: int,
    prior: Prior = DEFAULT_PRIOR,
    trace: list | None = None,
    fitted: bool = True,
) -> np.ndarray | None:
    """Strengths after exactly ``calls`` judgments under ``policy`` (swiss, random, adaptive,
    efficient). ``trace``, if given, receives (round, first, second, P(first)) per judgment;
    ``fitted=False``: the trace alone is wanted, no final fit (None)."""
    st = Standing(n)
    asked, rnd = 0, 0
    while asked < calls:
        rnd += 1
        rng = round_rng(seed, SIM_QUERY, rnd)
        strengths = fit(n, st.comparisons, prior) if policy == "adaptive" else None
        pairs = round_pairs(policy, st, rng, strengths)
        if not pairs:
            break  # every pair has met
        shown = [(x, y) if rng.random() < 0.5 else (y, x) for x, y in pairs]
        shown = shown[: calls - asked]
        first = np.array([f for f, _ in shown], dtype=np.int64)
        second = np.array([s for _, s in shown], dtype=np.int64)
        p = np.asarray(judge(first, second), dtype=np.float64)
        for f, s, pf in zip(first.tolist(), second.tolist(), p.tolist(), strict=True):
            winner = f if pf > 0.5 else s if pf < 0.5 else (f if rng.random() < 0.5 else s)
            st.record(f, s, winner, pf)
            if trace is not None:
                trace.append((rnd, f, s, pf))
        asked += len(shown)
    if not fitted:
        return None
    if policy == "efficient":
        soft = np.array(st.soft, dtype=np.float64).reshape(-1, 3)
        return estimate_strengths(
            n, soft[:, 0].astype(int), soft[:, 1].astype(int), soft[:, 2], st.comparisons, prior
        )
    return fit(n, st.comparisons, prior)
