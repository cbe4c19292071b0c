"""Thresholds and candidates from full rows instead of stored pairs (DESIGN.md, pair signals):
the rows' viability summaries decide the thresholds and which queries are viable (or, for
thresholds given as numbers or taken as percentiles, the triangle computed again), and only the
chosen queries' rows are computed in full for their candidate lists. Same rule, same seeds,
same answer as ``signals.thresholds.derive_thresholds`` and ``select.select_candidates`` over
the stored pairs (``tests/test_summaries.py``, ``perf/summaries.py``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import polars as pl

from saber_assets.candidates.select import SelectionSpec, select_from_rows
from saber_assets.config import CandidateConfig
from saber_assets.signals.prepare import SignalInputs
from saber_assets.signals.summaries import (
    query_rows,
    row_group_counts,
    thresholds_from_summaries,
    triangle_pairs,
    viability_summaries,
    viable_at,
)
from saber_assets.signals.thresholds import (
    Cut,
    ExactSignals,
    Threshold,
    ThresholdChoice,
    percentile_taus,
    percentile_thresholds,
)


@dataclass
class RowsSelection:
    """What the rows design decided: thresholds (quanta, or ``Cut`` where given as numbers), the
    derivation where there was one, the candidate lists and the seconds of each step."""

    topic: Threshold
    summary: Threshold
    choice: ThresholdChoice | None
    candidates: pl.DataFrame
    summary_bytes: int
    seconds: dict[str, float] = field(default_factory=dict)


def select_by_rows(
    inputs: SignalInputs,
    domains: Sequence[Sequence[str]],
    domain_order: Sequence[str],
    cand: CandidateConfig,
    seed: int,
    floors: tuple[int, int],
    threads: int = 1,
) -> RowsSelection:
    """The thresholds (derived by viability, given, or taken as a percentile) and every
    domain's candidate lists for the problems of ``inputs`` (rows in the signal pool's order)
    with their ``domains``."""
    arrays = inputs.arrays
    exact = ExactSignals.of(inputs)
    k, seconds = cand.candidates_per_group, {}
    t0 = time.perf_counter()
    choice, summary = None, None
    t_thr: Threshold
    s_thr: Threshold
    if cand.topic_threshold is not None and cand.summary_threshold is not None:
        rule = cand.threshold_rule
        t_thr, s_thr = Cut(cand.topic_threshold, rule), Cut(cand.summary_threshold, rule)
    elif cand.threshold_method == "percentile":
        chunks = partial(triangle_pairs, arrays, *floors, threads=threads)
        by = percentile_thresholds(
            chunks, inputs.n, domains, domain_order, cand.percentile, floors, exact
        )
        t_thr, s_thr = (
            Cut(tau, cand.threshold_rule) for tau in percentile_taus(by, cand.percentile_scope)
        )
        seconds["percentiles"] = time.perf_counter() - t0
    else:
        summary = viability_summaries(arrays, 0, inputs.n, k, floors, threads)
        seconds["summaries"] = time.perf_counter() - t0
        choice = thresholds_from_summaries(
            summary, domains, domain_order, cand.queries_per_domain, k, *floors
        )
        t_thr, s_thr = choice.topic_q, choice.summary_q
    t1 = time.perf_counter()
    spec = SelectionSpec(
        inputs.ids, domains, domain_order, t_thr, s_thr, k, cand.quota_per_domain, seed
    )
    if summary is not None:
        viable = viable_at(summary, t_thr, s_thr)
    else:
        viable = row_group_counts(arrays, t_thr, s_thr, exact, threads).min(axis=1) >= k
    selection = candidates_by_rows(inputs, spec, floors, viable, exact)
    seconds["selection"] = time.perf_counter() - t1
    nbytes = 0 if summary is None else summary.nbytes
    return RowsSelection(t_thr, s_thr, choice, selection, nbytes, seconds)


def candidates_by_rows(
    inputs: SignalInputs,
    spec: SelectionSpec,
    floors: tuple[int, int],
    viable: np.ndarray,
    exact: ExactSignals,
) -> pl.DataFrame:
    """The candidate lists of ``spec`` (its ids: the inputs' rows) from its ``viable`` rows:
    the chosen queries' own rows computed in full, at or above the ``floors``."""
    pairs_of = partial(query_rows, inputs.arrays, floor_topic=floors[0], floor_summary=floors[1])
    return select_from_rows(spec, np.asarray(viable), pairs_of, exact)
