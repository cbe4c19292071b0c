"""Kendall's τ-b between two scorings of the same items, for the boards, the fill and the
published grades alike."""

from __future__ import annotations

import math
from collections.abc import Sequence


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """scipy's τ-b (ties counted as the statistic defines); None with fewer than two items, or
    where it is undefined (a scoring that gives every item the same score)."""
    if len(x) < 2:
        return None
    # at use: scipy.stats is 0.4 s of every process that loads the definitions
    from scipy.stats import kendalltau

    tau = kendalltau(x, y).statistic
    return None if tau is None or math.isnan(tau) else float(tau)
