"""Thresholds given as numbers compare the exact similarity (sim > τ); the percentile method."""

import numpy as np
import pytest

from saber_assets.candidates.select import select_candidates
from saber_assets.signals.kernels import bma_jaccard_dense, quantize, to_csr
from saber_assets.signals.thresholds import (
    Cut,
    ExactSignals,
    PercentileError,
    Relevance,
    group_counts,
    percentile_thresholds,
)


def _inputs(token_sets):
    """Every problem on one topic (topic signal 1), summaries from the token sets."""
    t_ptr, t_idx = to_csr([[0]] * len(token_sets))
    s_ptr, s_idx = to_csr(token_sets)
    lin = np.ones((1, 1), dtype=np.float32)
    return ExactSignals(t_ptr, t_idx, lin, s_ptr, s_idx)


def test_a_byte_within_a_quantum_of_tau_is_decided_on_the_exact_value():
    # summaries 7/33 = 0.2121 (|A ∩ B| = 7, |A ∪ B| = 33) and 4/19 = 0.2105: both store byte 54
    sets = [range(0, 20), range(13, 33), range(0, 12), range(8, 19), range(100, 110), range(0, 10)]
    exact = _inputs([list(s) for s in sets])
    i, j = np.array([0, 2, 4]), np.array([1, 3, 5])
    _, summary = bma_jaccard_dense([[0]] * 6, np.ones((1, 1)), [list(s) for s in sets])
    sq = quantize(summary[i, j])
    tq = np.full(3, 255, dtype=np.uint8)
    assert summary[0, 1] == pytest.approx(7 / 33) and summary[2, 3] == pytest.approx(4 / 19)
    assert sq.tolist() == [54, 54, 0]
    t_rel, s_rel = Relevance(Cut(0.5), Cut(0.211), exact).masks(i, j, tq, sq)
    assert s_rel.tolist() == [True, False, False] and t_rel.all()
    assert exact.recomputed == 2  # only the two undecided bytes; 0 is surely below
    # the byte alone cannot tell them apart: at its quantum both fall on one side
    assert Relevance(255, int(quantize(0.211)), None).masks(i, j, tq, sq)[1].tolist() == [False] * 3
    # sim > τ, strictly: a value equal to τ is not above it
    assert Relevance(0, Cut(7 / 33), exact).masks(i, j, tq, sq)[1].tolist() == [False] * 3
    with pytest.raises(ValueError, match="needs the exact pair signals"):
        Relevance(0, Cut(0.211), None).masks(i, j, tq, sq)
    counts = group_counts(6, i, j, tq, sq, Cut(0.5), Cut(0.211), exact)
    assert counts[:, 2].tolist() == [1, 1, 0, 0, 0, 0]  # "both" for 0 and 1 only
    assert counts[:, 0].tolist() == [0, 0, 1, 1, 1, 1]  # topic-only for the rest


def test_selection_uses_the_exact_decision():
    # a query whose candidates sit at 7/33 (relevant at 0.211) or 8/38 = 0.2105 (not)
    rng = np.random.default_rng(0)
    sets = [list(range(0, 20))]  # the query
    sets += [list(range(13, 33))] * 3 + [list(range(8)) + list(range(40, 58))] * 3
    sets += [list(range(0, 20))] * 3  # summary-only: their topic byte is set to 0 below
    exact = _inputs(sets)
    n = len(sets)
    i = np.zeros(n - 1, dtype=np.int64)
    j = np.arange(1, n, dtype=np.int64)
    _, summary = bma_jaccard_dense([[0]] * n, np.ones((1, 1)), sets)
    assert summary[0, 4] == pytest.approx(8 / 38) and quantize(summary[0, 4]) == 54
    sq, tq = quantize(summary[i, j]), np.full(n - 1, 255, dtype=np.uint8)
    tq[-3:] = 0
    got = select_candidates(
        [f"p{k}" for k in range(n)], [["A"]] * n, ["A"], lambda: [(i, j, tq, sq)],
        Cut(0.5), Cut(0.211), 3, 1, seed=int(rng.integers(100)), exact=exact,
    )  # fmt: skip
    q0 = got.filter(got["query_id"] == "p0")
    assert set(q0.filter(q0["group"] == "both")["candidate_id"]) == {"p1", "p2", "p3"}
    assert set(q0.filter(q0["group"] == "topic_only")["candidate_id"]) == {"p4", "p5", "p6"}
    assert set(q0.filter(q0["group"] == "summary_only")["candidate_id"]) == {"p7", "p8", "p9"}


class Table:
    """Exact values from a matrix: the pair signals of a constructed distribution."""

    def __init__(self, topic, summary):
        self.topic, self.summary, self.recomputed = topic, summary, 0

    def __call__(self, i, j):
        self.recomputed += len(i)
        return self.topic[i, j], self.summary[i, j]


def _distribution(n, seed):
    rng = np.random.default_rng(seed)
    topic = rng.beta(2, 5, (n, n))
    summary = rng.beta(1, 8, (n, n))
    topic, summary = np.triu(topic, 1), np.triu(summary, 1)
    return topic + topic.T, summary + summary.T


@pytest.mark.parametrize("p", [99.0, 90.0, 75.0])
def test_percentile_method_on_a_constructed_distribution(p):
    n = 60
    topic, summary = _distribution(n, 3)
    iu = np.triu_indices(n, 1)
    domains = [["A"] if r < 20 else ["B"] if r < 50 else ["A", "B"] for r in range(n)]
    table = Table(topic, summary)

    def chunks(floor_t=0, floor_s=0):
        tq, sq = quantize(topic[iu]), quantize(summary[iu])
        keep = (tq >= floor_t) | (sq >= floor_s)
        i, j = iu[0][keep], iu[1][keep]
        half = len(i) // 2  # two chunks: any cut adds up to the whole
        return lambda: [(a[:half], b[:half], c[:half], d[:half]) for a, b, c, d in
                        [(i, j, tq[keep], sq[keep])]] + [(a[half:], b[half:], c[half:], d[half:])
                        for a, b, c, d in [(i, j, tq[keep], sq[keep])]]  # fmt: skip

    got = percentile_thresholds(chunks(), n, domains, ["A", "B"], p, (0, 0), table)
    want = np.quantile(topic[iu], p / 100, method="inverted_cdf")
    assert got[None][0] == want
    assert got[None][1] == np.quantile(summary[iu], p / 100, method="inverted_cdf")
    for d in ("A", "B"):  # the ordered pairs whose query is in the domain
        rows = [r for r in range(n) if d in domains[r]]
        vals = np.concatenate([np.delete(topic[r], r) for r in rows])
        assert got[d][0] == np.quantile(vals, p / 100, method="inverted_cdf")
    assert table.recomputed < len(iu[0]) / 10  # only the percentiles' quanta are recomputed
    # storage floors below the percentiles: the same, exactly, from fewer stored pairs
    ft = min(int(quantize(v[0])) for v in got.values()) - 2
    fs = min(int(quantize(v[1])) for v in got.values()) - 2
    floored = percentile_thresholds(chunks(ft, fs), n, domains, ["A", "B"], p, (ft, fs), table)
    assert floored == got
    # a floor above the percentile: the stored pairs cannot tell it
    with pytest.raises(PercentileError, match="lower signals.floor_topic"):
        percentile_thresholds(chunks(ft + 10, 0), n, domains, ["A", "B"], p, (ft + 10, 0), table)


def test_a_threshold_whose_relevant_pairs_reach_below_a_floor_is_refused():
    from saber_assets.signals.thresholds import check_floors

    check_floors(50, 50, (51, 51))  # q > 50: byte 51 up, all stored
    with pytest.raises(ValueError, match="below the storage floors"):
        check_floors(49, 50, (51, 51))
    # sim > 0.2 stores byte 51 or more; sim > 0.197 can store byte 50, under a floor of 51
    check_floors(Cut(0.5), Cut(0.2), (128, 51))
    with pytest.raises(ValueError, match="below the storage floors"):
        check_floors(Cut(0.5), Cut(0.197), (128, 51))
    assert quantize(0.1975) == 50 and 0.1975 > 0.197  # such a pair exists, and would be missed
