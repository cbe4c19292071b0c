"""The storage floors of the first pass: storing only what a threshold can select changes no
threshold and no candidate list."""

import numpy as np
import pytest

from saber_assets.candidates.select import select_candidates
from saber_assets.config import CandidateConfig
from saber_assets.signals.bounds import choose_floors, stored_share
from saber_assets.signals.kernels import row_histograms, signal_block, to_csr
from saber_assets.signals.thresholds import (
    Cut,
    ExactSignals,
    derive_thresholds,
    in_memory_blocks,
    percentile_thresholds,
)

DOMAINS = ["A", "B", "C"]
CONFIG_FLOORS = (127, 51)  # the defaults, 0.5 / 0.2


def _case(seed: int, n: int = 420):
    rng = np.random.default_rng(seed)
    t = 14
    lin = rng.random((t, t)).astype(np.float32) ** 2
    lin = (lin + lin.T) / 2
    np.fill_diagonal(lin, 1.0)
    topics = [rng.choice(t, rng.integers(1, 4), replace=False).tolist() for _ in range(n)]
    tokens = [rng.choice(24, rng.integers(2, 9), replace=False).tolist() for _ in range(n)]
    domains = [rng.choice(DOMAINS, rng.integers(1, 3), replace=False).tolist() for _ in range(n)]
    tp, ti = to_csr(topics)
    sp, si = to_csr(tokens)
    return (tp, ti, lin, sp, si), domains


def _stored(arrays, n, floors):
    indptr, cols, tq, sq, _ = signal_block(*arrays, 0, n, *floors, threads=2)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    return rows, cols.astype(np.int64), tq, sq


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("q_min", "k"), [(8, 3), (20, 5), (40, 8)])
def test_viability_thresholds_and_candidates_are_those_of_every_pair_above_the_config_floors(
    seed, q_min, k
):
    arrays, domains = _case(seed)
    n = len(domains)
    cand = CandidateConfig(queries_per_domain=q_min, candidates_per_group=k, quota_per_domain=12)
    floors, hist = choose_floors(
        lambda: row_histograms(*arrays, 16, threads=2), domains, DOMAINS, cand, CONFIG_FLOORS
    )
    assert hist is not None and hist.sum() == n * (n - 1)
    assert floors.topic >= CONFIG_FLOORS[0] and floors.summary >= CONFIG_FLOORS[1]
    full, bound = (
        _stored(arrays, n, CONFIG_FLOORS),
        _stored(arrays, n, (floors.topic, floors.summary)),
    )
    assert len(bound[0]) <= len(full[0])

    def derive(pairs, fl):
        try:
            return derive_thresholds(in_memory_blocks(n, pairs), domains, DOMAINS, q_min, k, *fl)
        except ValueError as e:  # no domain feasible: the same refusal either way
            return str(e)

    want = derive(full, CONFIG_FLOORS)
    got = derive(bound, (floors.topic, floors.summary))
    assert got == want
    if isinstance(want, str):
        return
    ids = [f"p{x}" for x in range(n)]
    picks = [
        select_candidates(
            ids, domains, DOMAINS, lambda p=p: [p], want.topic_q, want.summary_q, k, 12, 7
        )  # fmt: skip
        for p in (full, bound)
    ]
    assert picks[0].height > 0 and picks[0].equals(picks[1])


def test_the_floors_rise_above_the_config_floors_and_store_less():
    arrays, domains = _case(3)
    n = len(domains)
    cand = CandidateConfig(queries_per_domain=8, candidates_per_group=3)
    floors, hist = choose_floors(
        lambda: row_histograms(*arrays, 16), domains, DOMAINS, cand, CONFIG_FLOORS
    )
    chosen = derive_thresholds(
        in_memory_blocks(n, _stored(arrays, n, CONFIG_FLOORS)), domains, DOMAINS, 8, 3,
        *CONFIG_FLOORS,
    )  # fmt: skip
    # the floors sit under the chosen thresholds and above the configured ones
    assert floors.topic <= chosen.topic_q + 1 and floors.summary <= chosen.summary_q + 1
    assert floors.topic > CONFIG_FLOORS[0]
    assert stored_share(hist, floors) < stored_share(hist, floors.__class__(*CONFIG_FLOORS, "c"))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("p", [90.0, 99.0, 99.7])
def test_percentile_thresholds_are_those_of_every_pair_above_the_config_floors(seed, p):
    arrays, domains = _case(seed)
    n = len(domains)
    cand = CandidateConfig(threshold_method="percentile", percentile=p)
    floors, hist = choose_floors(
        lambda: row_histograms(*arrays, 16), domains, DOMAINS, cand, (0, 0)
    )
    fl = (floors.topic, floors.summary)
    assert fl > (0, 0)
    full, bound = _stored(arrays, n, (0, 0)), _stored(arrays, n, fl)
    want = percentile_thresholds(
        lambda: [full], n, domains, DOMAINS, p, (0, 0), ExactSignals(*arrays)
    )
    got = percentile_thresholds(lambda: [bound], n, domains, DOMAINS, p, fl, ExactSignals(*arrays))
    assert got == want


def test_given_thresholds_skip_the_first_pass_and_store_from_a_byte_below_them():
    cand = CandidateConfig(topic_threshold=0.858, summary_threshold=0.211)

    def never():
        raise AssertionError("the first pass ran")

    floors, hist = choose_floors(never, [], DOMAINS, cand, CONFIG_FLOORS)
    assert hist is None and floors.source == "config"
    assert (floors.topic, floors.summary) == (Cut(0.858).q - 1, Cut(0.211).q - 1)
    unbound, _ = choose_floors(never, [], DOMAINS, cand, CONFIG_FLOORS, bound=False)
    assert (unbound.topic, unbound.summary) == CONFIG_FLOORS


def test_appended_problems_count_only_their_own_pairs_onto_the_kept_histograms(
    tmp_path, monkeypatch
):
    from saber_assets.signals import stored
    from saber_assets.signals.prepare import SignalInputs

    (tp, ti, lin, sp, si), _ = _case(1, n=300)

    def inputs(n):
        return SignalInputs(
            [f"p{x}" for x in range(n)], tp[: n + 1], ti[: tp[n]], lin, np.arange(len(lin)),
            sp[: n + 1], si[: sp[n]], [str(x) for x in range(24)], "ic",
        )  # fmt: skip

    first = stored.cached_row_histograms(inputs(230), tmp_path, 8, 2)
    assert np.array_equal(first, row_histograms(tp[:231], ti[: tp[230]], lin, sp[:231],
                                                si[: sp[230]], 8))  # fmt: skip
    calls = []
    real = stored.row_histograms
    monkeypatch.setattr(
        stored, "row_histograms", lambda *a, **kw: calls.append(kw) or real(*a, **kw)
    )
    grown = stored.cached_row_histograms(inputs(300), tmp_path, 8, 2)
    assert calls == [{"rows": (0, 70)}]  # the 70 appended rows' pairs only
    assert np.array_equal(grown, row_histograms(tp, ti, lin, sp, si, 8, threads=2))
    assert [p.name.split("-")[1] for p in tmp_path.glob("row_hist-*.npy")] == ["000000300"]
    assert np.array_equal(stored.cached_row_histograms(inputs(300), tmp_path, 8, 2), grown)
    assert len(calls) == 1  # read back
