"""Candidate selection, Swiss/adaptive pairing, Bradley–Terry, the resumable tournament."""

import hashlib
import json

import choix
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import kendalltau

from saber_assets.candidates.select import select_candidates, selection_key
from saber_assets.ratings.bradley_terry import DEFAULT_PRIOR, Prior, fit, fit_many, rescale
from saber_assets.ratings.rate import rate
from saber_assets.signals.thresholds import group_counts
from saber_assets.tournament.adaptive import pair_round_adaptive
from saber_assets.tournament.engine import MemoryStore, TournamentQuery, run_tournament
from saber_assets.tournament.store import DuckDBJudgmentStore
from saber_assets.tournament.swiss import pair_round
from saber_resources.llm_tasks import Outcome
from saber_resources.warehouse import Warehouse

# ------------------------------------------------------------------------------- pairing


def _simulate_swiss(n, rounds, seed, strengths=None):
    rng = np.random.default_rng(seed)
    wins = np.zeros(n, dtype=int)
    played: set = set()
    history = []
    for _ in range(rounds):
        pairs = pair_round(wins, played, rng)
        history.append(pairs)
        for a, b in pairs:
            played.add(frozenset((a, b)))
            s = strengths if strengths is not None else np.arange(n)
            wins[a if s[a] > s[b] else b] += 1
    return history, wins, played


def test_round_one_is_a_perfect_matching():
    for n in (2, 10, 150):
        pairs = pair_round(np.zeros(n, dtype=int), set(), np.random.default_rng(1))
        assert len(pairs) == n // 2 and sorted(x for p in pairs for x in p) == list(range(n))
    pairs = pair_round(np.zeros(7, dtype=int), set(), np.random.default_rng(1))
    assert len(pairs) == 3  # odd: exactly one sits out


def test_swiss_invariants_over_many_rounds():
    history, wins, played = _simulate_swiss(30, 25, seed=3)
    seen = set()
    for pairs in history:
        members = [x for p in pairs for x in p]
        assert len(members) == len(set(members))  # at most once per round
        for a, b in pairs:
            assert frozenset((a, b)) not in seen  # never a rematch
            seen.add(frozenset((a, b)))
    assert sum(wins) == len(seen)


def test_sit_outs_only_when_forced():
    rng = np.random.default_rng(0)
    n = 12
    for rounds in range(1, 11):
        history, wins, played = _simulate_swiss(n, rounds, seed=rounds)
        pairs = pair_round(wins, played, rng)
        paired = {x for p in pairs for x in p}
        for c in set(range(n)) - paired:
            # every other unpaired candidate must be someone c has already met
            for d in set(range(n)) - paired - {c}:
                assert frozenset((c, d)) in played


def test_swiss_pairs_close_win_counts():
    wins = np.array([0, 0, 3, 3, 1, 1])
    pairs = pair_round(wins, set(), np.random.default_rng(0))
    assert sorted(tuple(sorted(int(wins[x]) for x in p)) for p in pairs) == [(0, 0), (1, 1), (3, 3)]


def test_pairing_is_seeded():
    a = _simulate_swiss(40, 10, seed=9)[0]
    b = _simulate_swiss(40, 10, seed=9)[0]
    c = _simulate_swiss(40, 10, seed=10)[0]
    assert a == b and a != c


def test_adaptive_never_repeats_and_respects_budget():
    rng = np.random.default_rng(0)
    s = rng.normal(size=20)
    played = {frozenset((0, 1))}
    pairs = pair_round_adaptive(s, played, rng, budget=4)
    assert len(pairs) == 4 and frozenset((0, 1)) not in {frozenset(p) for p in pairs}
    gaps = sorted(
        abs(s[a] - s[b]) for a, b in pair_round_adaptive(s, played, np.random.default_rng(0))
    )
    assert sorted(abs(s[a] - s[b]) for a, b in pairs) == gaps[:4]


# ------------------------------------------------------------------------------------ BT

CHOIX = Prior("choix", alpha=0.1)  # choix's prior, the option beside the default l2


def test_bt_equals_choix_mm_and_recovers_strengths():
    rng = np.random.default_rng(4)
    n = 60
    truth = rng.normal(0, 1.5, n)
    comps = []
    for _ in range(3000):
        a, b = rng.choice(n, 2, replace=False)
        comps.append((a, b) if rng.random() < 1 / (1 + np.exp(truth[b] - truth[a])) else (b, a))
    mine = fit(n, comps, prior=CHOIX)
    ref = choix.mm_pairwise(
        n, comps, alpha=0.1, tol=1e-12, max_iter=100_000
    )  # choix run to full precision
    assert np.abs(mine - ref).max() < 1e-7
    assert kendalltau(mine, truth).statistic > 0.8


def test_bt_undefeated_and_never_played_stay_finite():
    s = fit(4, [(0, 1), (0, 2), (0, 1)], prior=CHOIX)  # 0 undefeated, 3 never played
    assert np.all(np.isfinite(s)) and s[0] == s.max()
    # the never-played candidate keeps the prior weight 1: above the losers, below the winner
    assert s[1] < s[3] < s[0] and s[2] < s[3]
    r = rescale(s)
    assert r.min() == 0 and r.max() == 5 and r[0] == 5
    assert rescale(np.zeros(3)).tolist() == [2.5, 2.5, 2.5]
    many = fit_many([(4, [(0, 1)]), (3, [(2, 1), (2, 0)])])
    assert np.allclose(many[0], fit(4, [(0, 1)])) and np.allclose(many[1], fit(3, [(2, 1), (2, 0)]))
    with pytest.raises(ValueError, match="alpha must be > 0"):
        fit(2, [(0, 1)], prior=Prior("choix", alpha=0))


def test_bt_fit_many_batches_equal_single_fits_and_prior_rules():
    rng = np.random.default_rng(8)
    # 300 queries of 3 candidates (more than one batch of 256) and 2 queries of 5 (a batch
    # smaller than its candidate count)
    problems = [(3, [tuple(rng.choice(3, 2, replace=False)) for _ in range(4)]) for _ in range(300)]
    problems += [(5, [tuple(rng.choice(5, 2, replace=False)) for _ in range(9)]) for _ in range(2)]
    for prior in (DEFAULT_PRIOR, CHOIX):
        many = fit_many(problems, prior)
        assert len(many) == 302 and all(m is not None for m in many)
        for k in (0, 1, 255, 256, 299, 300, 301):
            assert np.allclose(many[k], fit(*problems[k], prior=prior), atol=1e-8)
    comps = problems[300][1]
    assert DEFAULT_PRIOR == Prior("l2", c=1.0)  # the published ratings' prior
    assert np.array_equal(fit(5, comps), fit(5, comps, prior=Prior("l2", c=1.0)))
    assert not np.allclose(fit(5, comps), fit(5, comps, prior=Prior("l2", c=2.0)))
    assert not np.allclose(
        fit(5, comps, prior=CHOIX), fit(5, comps, prior=Prior("choix", alpha=0.2))
    )
    for bad in (0, -0.1):
        with pytest.raises(ValueError, match="alpha must be > 0"):
            fit(2, [(0, 1)], prior=Prior("choix", alpha=bad))
        with pytest.raises(ValueError, match="c must be > 0"):
            fit(2, [(0, 1)], prior=Prior("l2", c=bad))
    with pytest.raises(TypeError, match="must be a Prior"):
        fit(2, [(0, 1)], 0.1)  # a bare alpha from an old caller


def _logistic_design(n, comps, ties, rng):
    """The reference's design: one ±1 row per decision (shown in a random order, so that both
    classes occur), a tie as two half-weight rows with opposite labels."""
    rows, labels, weights = [], [], []
    for w, lo in comps:
        x = np.zeros(n)
        first, second = (w, lo) if rng.random() < 0.5 else (lo, w)
        x[first], x[second] = 1.0, -1.0
        rows.append(x), labels.append(int(first == w)), weights.append(1.0)
    for a, b in ties:
        x = np.zeros(n)
        x[a], x[b] = 1.0, -1.0
        for y in (0, 1):
            rows.append(x), labels.append(y), weights.append(0.5)
    return np.array(rows), np.array(labels), np.array(weights)


@pytest.mark.parametrize("c", [1.0, 0.3])
def test_bt_l2_default_equals_sklearn_logistic_regression_without_intercept(c):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(11)
    n = 12
    truth = rng.normal(0, 1.0, n)
    comps = []
    for _ in range(70):
        a, b = rng.choice(n - 1, 2, replace=False)  # candidate n-1 never plays
        comps.append((a, b) if rng.random() < 1 / (1 + np.exp(truth[b] - truth[a])) else (b, a))
    comps += [(0, 1)] * 3  # 0 beats 1 thrice
    ties = [(2, 3), (4, 5), (2, 3)]
    x, y, wt = _logistic_design(n, comps, ties, rng)
    ref = LogisticRegression(C=c, fit_intercept=False, tol=1e-12, max_iter=10_000)
    ref.fit(x, y, sample_weight=wt)
    mine = fit(n, comps, Prior("l2", c=c), ties=ties)
    assert np.abs(mine - ref.coef_[0]).max() < 1e-6
    assert mine[n - 1] == pytest.approx(0.0, abs=1e-12)  # never played: the prior's mode
    # ties matter: dropping them moves the fit
    assert np.abs(fit(n, comps, Prior("l2", c=c)) - mine).max() > 1e-3


def test_rescale_known_values_custom_range_and_edges():
    assert rescale(np.array([0.0, 1.0, 3.0])) == pytest.approx([0.0, 5 / 3, 5.0], abs=1e-15)
    assert rescale(np.array([2.0, 4.0, 3.0]), low=1.0, high=3.0).tolist() == [1.0, 3.0, 2.0]
    assert rescale(np.array([-2.0, 6.0, 0.0]), low=-1.0, high=1.0) == pytest.approx(
        [-1.0, 1.0, -0.5], abs=1e-15
    )
    assert rescale(np.array([])).shape == (0,)
    assert rescale(np.array([3.7])).tolist() == [2.5]  # one candidate: no information
    assert rescale(np.array([1.0, 1.0 + 5e-13])).tolist() == [2.5, 2.5]
    assert rescale(np.array([0.0, 1e-12])).tolist() == [0.0, 5.0]  # the tolerance is strict


# -------------------------------------------------------------------------- tournament


class SimJudge:
    """Judges by a hidden strength per text; can crash after a number of calls, or garble some."""

    backend, model, version = "sim", "sim", "sim/v1"

    def __init__(self, strength, crash_after=None, garble=()):
        self.strength = strength
        self.crash_after = crash_after
        self.garble = set(garble)
        self.calls = 0
        self.seen = []

    def text_for(self, p, s):
        return p

    def compare_batch(self, items):
        # a kill between two judge batches (a batch in flight is lost whole, never half-stored)
        if self.crash_after is not None and self.calls >= self.crash_after:
            raise RuntimeError("killed")
        out = []
        for q, a, b in items:
            self.calls += 1
            self.seen.append((q, a, b))
            if a in self.garble or b in self.garble:
                out.append(Outcome(None, ok=False, error="expected 1 or 2", raw="maybe"))
            else:
                out.append(self.answer(a, b))
        return out

    def answer(self, a, b) -> Outcome:
        return Outcome(1 if self.strength[a] >= self.strength[b] else 2, raw="1")


def _queries(nq=3, n=16, seed=0):
    rng = np.random.default_rng(seed)
    strength, qs = {}, []
    for q in range(nq):
        cands = [f"q{q}-c{k}" for k in range(n)]
        for c in cands:
            strength[c] = float(rng.normal())
        qs.append(TournamentQuery(f"q{q}", f"query {q}", cands, cands))
    return qs, strength


def test_resume_after_crash_requests_nothing_twice_and_matches_uninterrupted():
    qs, strength = _queries()
    ref_store = MemoryStore()
    ref, _ = run_tournament(qs, SimJudge(strength), ref_store, rounds=6, seed=7, chunk=5)
    store = DuckDBJudgmentStore(Warehouse(path=":memory:").connect)
    crashing = SimJudge(strength, crash_after=37)
    with pytest.raises(RuntimeError, match="killed"):
        run_tournament(qs, crashing, store, rounds=6, seed=7, chunk=5)
    assert len(store.load(store_keys(store)[0])) == crashing.calls >= 37
    resumed_judge = SimJudge(strength)
    res, stats = run_tournament(qs, resumed_judge, store, rounds=6, seed=7, chunk=5)
    asked = crashing.seen + resumed_judge.seen
    keys = [(q, frozenset((a, b))) for q, a, b in asked]
    assert len(keys) == len(set(keys))  # no judgment requested twice
    assert stats["replayed"] > 0
    for q in qs:
        assert sorted(res[q.query_id].comparisons) == sorted(ref[q.query_id].comparisons)
        assert np.allclose(
            fit(16, res[q.query_id].comparisons), fit(16, ref[q.query_id].comparisons)
        )
    # a second full rerun asks nothing at all
    again = SimJudge(strength)
    run_tournament(qs, again, store, rounds=6, seed=7, chunk=5)
    assert again.calls == 0


class LedgerJudge(SimJudge):
    """Answers by display order (1 = the first shown), with a probability and a raw text that
    differ per pair; garbles pairs that hold a listed candidate (and still sends a probability,
    which a failure must not keep)."""

    max_tokens = 77

    def __init__(self, strength, garble=()):
        super().__init__(strength)
        self.bad = set(garble)

    def answer(self, a, b) -> Outcome:
        if a in self.bad or b in self.bad:
            return Outcome(None, ok=False, error="expected 1 or 2", raw="maybe", p_first=0.5)
        first_better = self.strength[a] >= self.strength[b]
        p = 0.9 if first_better else 0.2
        return Outcome(1 if first_better else 2, raw=f"answer {a} {b}", p_first=p)


def test_engine_ledger_every_field_of_every_judgment_and_the_statistics():
    from saber_assets.tournament.engine import run_key

    rng = np.random.default_rng(2)
    qs = []
    strength = {}
    for q in range(2):
        cands = [f"q{q}-c{k}" for k in range(6)]
        texts = [f"text of {c}" for c in cands]  # texts differ from ids: the judge sees texts
        strength.update({t: float(rng.normal()) for t in texts})
        qs.append(TournamentQuery(f"q{q}", f"query {q}", cands, texts))
    garbled = "text of q1-c2"
    judge = LedgerJudge(strength, garble=[garbled])
    store = MemoryStore()
    calls = []
    _, stats = run_tournament(
        qs, judge, store, rounds=3, seed=4, chunk=4, on_round=lambda *a: calls.append(a)
    )
    key = run_key(judge, 4, "swiss", 3)
    rows = store.load(key)
    assert len(rows) == stats["requested"] == 18 == len(judge.seen)  # 3 pairs x 2 queries x 3
    assert calls == [(1, 6, 0), (2, 6, 0), (3, 6, 0)]
    assert sorted({(j.query, j.round) for j in rows}) == [
        (q, r) for q in ("q0", "q1") for r in (1, 2, 3)
    ]
    text = {c: t for q in qs for c, t in zip(q.candidates, q.texts, strict=True)}
    for j, (qtext, first_t, second_t) in zip(rows, judge.seen, strict=True):
        assert j.a < j.b and {j.a, j.b} == {j.shown_first, j.b if j.shown_first == j.a else j.a}
        assert qtext == f"query {j.query[1]}" and first_t == text[j.shown_first]
        other = j.b if j.shown_first == j.a else j.a
        assert second_t == text[other]
        assert j.judge == "sim:sim" and j.prompt_version == "sim/v1" and j.max_tokens == 77
        if garbled in (first_t, second_t):
            assert j.winner is None and j.raw == "maybe" and j.error == "expected 1 or 2"
            assert j.p_first is None
        else:
            want = j.shown_first if strength[first_t] >= strength[second_t] else other
            assert j.winner == want and j.raw is None and j.error is None
            assert j.p_first == (0.9 if want == j.shown_first else 0.2)
            raw = f"answer {first_t} {second_t}"
            assert j.raw_hash == hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()
    assert stats["failures"] == sum(j.winner is None for j in rows) > 0
    assert (stats["replayed"], stats["seed"], stats["policy"], stats["run_key"]) == (
        0,
        4,
        "swiss",
        key,
    )
    # the rerun replays all 18, asks nothing, and reports the replays per round
    again, calls2 = LedgerJudge(strength, garble=[garbled]), []
    st2, stats2 = run_tournament(
        qs, again, store, rounds=3, seed=4, chunk=4, on_round=lambda *a: calls2.append(a)
    )
    assert again.calls == 0 and stats2["requested"] == 0 and stats2["replayed"] == 18
    assert calls2 == [(1, 0, 6), (2, 0, 12), (3, 0, 18)]
    # the adaptive policy (named as a config file would) refits strengths every round
    for adaptive in ("adaptive", json.loads('"adaptive"')):
        adaptive_judge = LedgerJudge(strength)
        _, st_ad = run_tournament(qs, adaptive_judge, MemoryStore(), 3, 4, adaptive)
        assert st_ad["requested"] == adaptive_judge.calls > 0 and st_ad["policy"] == "adaptive"
    st0 = st2["q0"]
    assert st0.decided == len(st0.comparisons) == 9 and st0.failures == 0
    assert st2["q1"].failures == stats["failures"] and st2["q1"].decided == 9 - st2["q1"].failures


def test_standing_record_run_key_round_pairs_and_wilson():
    from scipy.stats import binomtest

    from saber_assets.tournament.engine import Standing, round_pairs, run_key, wilson_interval

    st = Standing(6)
    st.record(2, 5, 5, 0.3)  # the second shown wins
    st.record(1, 3, 1, None)  # the first shown wins, no probability
    st.record(0, 4, None, 0.5)  # a failure: played, counted, never a comparison
    st.record(4, 2, 4, None)  # the first shown wins again
    st.record(4, 1, 1, 0.4)  # the second shown wins, with a lower index than the first
    st.record(3, 0, 3, None)  # first-shown wins outnumber second-shown wins: 3 to 2
    assert st.comparisons == [(5, 2), (1, 3), (4, 2), (1, 4), (3, 0)]
    assert st.wins.tolist() == [0, 2, 0, 1, 1, 1]
    assert (st.decided, st.first_wins, st.failures) == (5, 3, 1)
    assert st.soft == [(2, 5, 0.3), (4, 1, 0.4)] and frozenset((0, 4)) in st.played
    # pairing dispatch
    rng = np.random.default_rng(0)
    for policy in ("swiss", "random", "efficient"):
        pairs = round_pairs(policy, Standing(6), np.random.default_rng(1))
        assert sorted(x for p in pairs for x in p) == list(range(6)), policy
    adaptive = round_pairs("adaptive", Standing(6), rng, np.arange(6.0), budget=2)
    assert len(adaptive) == 2
    for unknown in ("elo", "aaa", "zzz", "tournament"):  # before, between and after the names
        with pytest.raises(ValueError, match=f"unknown tournament policy '{unknown}'"):
            round_pairs(unknown, Standing(6), rng)
    # efficient pairing reads the soft judgments as (first, second, probability) columns
    from saber_assets.tournament.efficient import pair_round_efficient

    soft = Standing(6)
    for f, sec, w, p in ((0, 1, 0, 0.8), (2, 3, 3, 0.3), (5, 4, 5, 0.6)):
        soft.record(f, sec, w, p)
    want = pair_round_efficient(
        6,
        np.array([0, 2, 5]),
        np.array([1, 3, 4]),
        np.array([0.8, 0.3, 0.6]),
        soft.wins,
        soft.played,
        np.random.default_rng(3),
    )
    assert round_pairs("efficient", soft, np.random.default_rng(3)) == want
    # a policy read from a config is an equal string, not the literal's object
    for policy in json.loads('["swiss", "random", "efficient"]'):
        assert round_pairs(policy, Standing(4), np.random.default_rng(1))
    assert round_pairs(json.loads('"adaptive"'), Standing(4), rng, np.arange(4.0), budget=1)
    # a run key changes with everything that makes another tournament
    judge = SimJudge({})
    base = run_key(judge, 1, "swiss", 20)
    # stored tournaments are found by this key: its text must never change between versions
    pinned = hashlib.blake2b(b"sim|sim|sim/v1|1|swiss|20|", digest_size=8).hexdigest()
    assert base == pinned
    with_budget = hashlib.blake2b(b"sim|sim|sim/v1@77|1|swiss|20|", digest_size=8).hexdigest()
    assert run_key(LedgerJudge({}), 1, "swiss", 20) == with_budget
    assert base == run_key(judge, 1, "swiss", 20, "")
    budget = LedgerJudge({})
    assert run_key(budget, 1, "swiss", 20) != base  # same judge, a token budget
    other = [run_key(judge, 2, "swiss", 20), run_key(judge, 1, "adaptive", 20)]
    other += [run_key(judge, 1, "swiss", 21), run_key(judge, 1, "swiss", 20, "Algebra")]
    assert len({base, *other}) == 5 and len(base) == 16
    # the Wilson interval against scipy's (z = 1.96 against scipy's exact quantile)
    for k, n in ((8, 10), (0, 7), (7, 7), (33, 120), (1, 2)):
        want = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((want.low, want.high), abs=2e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 7)[0] == 0.0 and wilson_interval(7, 7)[1] == 1.0


def store_keys(store):
    return [r[0] for r in store.db.fetch("SELECT DISTINCT run_key FROM judgments")]


def test_direction_end_to_end_the_judges_choice_wins_and_ratings_follow_it():
    """A judge that always prefers the truly stronger candidate, whichever is shown first: every
    stored winner is its choice, and the final ratings rank candidates in the true order."""
    qs, strength = _queries(nq=4, n=20, seed=11)
    store = DuckDBJudgmentStore(Warehouse(path=":memory:").connect)
    judge = SimJudge(strength)
    _, stats = run_tournament(qs, judge, store, rounds=12, seed=5)
    [key] = store_keys(store)
    judged = store.frame(key)
    assert judged.height == stats["requested"] > 0
    stronger = [
        a if strength[a] >= strength[b] else b for a, b in judged.select("a", "b").iter_rows()
    ]
    assert judged["winner"].to_list() == stronger
    shown_first_won = (judged["winner"] == judged["shown_first"]).to_list()
    assert any(shown_first_won) and not all(shown_first_won)  # both display orders occur
    cands = pl.DataFrame(
        [
            {"query_id": q.query_id, "candidate_id": c, "position": k}
            for q in qs
            for k, c in enumerate(q.candidates)
        ]
    )
    rated = rate(cands, judged, prior=CHOIX)
    assert rated["rating"].min() == 0 and rated["rating"].max() == 5
    for q in qs:
        r = rated.filter(pl.col("query_id") == q.query_id)
        truth = [strength[c] for c in r["candidate_id"]]
        assert kendalltau(r["rating"].to_numpy(), truth).statistic > 0.75
        best = r["candidate_id"][int(np.argmax(r["rating"].to_numpy()))]
        assert strength[best] == max(truth)  # the strongest candidate gets the top rating
    with pytest.raises(ValueError, match="neither of the two"):
        rate(cands, judged.with_columns(pl.lit("q0-c99").alias("winner")), prior=CHOIX)


def test_rate_counts_games_skips_failures_and_keeps_rows_by_key():
    cands = pl.DataFrame(
        {
            "query_id": ["q2", "q1", "q1", "q1", "q2"],
            "candidate_id": ["y", "a", "b", "c", "x"],
            "position": [1, 0, 1, 2, 0],
        }
    )
    judged = pl.DataFrame(
        {
            "query": ["q1", "q1", "q1", "q2"],
            "a": ["a", "a", "b", "x"],
            "b": ["c", "b", "c", "y"],
            "winner": [None, "a", "b", "y"],  # a failure first: the rest still count
        }
    )
    out = rate(cands, judged, prior=CHOIX)
    rows = {(r["query_id"], r["candidate_id"]): r for r in out.iter_rows(named=True)}
    assert out.height == 5 and out["query_id"].to_list() == ["q1", "q1", "q1", "q2", "q2"]
    assert {k: r["games"] for k, r in rows.items()} == {
        ("q1", "a"): 1,
        ("q1", "b"): 2,
        ("q1", "c"): 1,
        ("q2", "x"): 1,
        ("q2", "y"): 1,
    }
    assert rows[("q1", "a")]["rating"] == 5 and rows[("q1", "c")]["rating"] == 0
    assert rows[("q2", "y")]["rating"] == 5 and rows[("q2", "x")]["rating"] == 0
    empty = rate(cands.head(0), judged.head(0), prior=CHOIX)
    assert empty.height == 0 and {"strength", "rating", "games"} <= set(empty.columns)


def test_failures_are_recorded_not_dropped():
    qs, strength = _queries(nq=1, n=8)
    store = MemoryStore()
    res, stats = run_tournament(qs, SimJudge(strength, garble={"q0-c3"}), store, rounds=4, seed=1)
    rows = next(iter(store.rows.values()))
    failed = [j for j in rows if j.winner is None]
    assert failed and all(j.raw == "maybe" and j.error == "expected 1 or 2" for j in failed)
    assert res["q0"].failures == len(failed) == stats["failures"]
    assert all("q0-c3" in (j.a, j.b) for j in failed)
    # presentation order is randomised and recorded
    assert {j.shown_first == j.a for j in rows} == {True, False}


def test_candidate_selection_seeded_and_well_formed():
    rng = np.random.default_rng(0)
    n = 60
    ii, jj = np.triu_indices(n, 1)
    tq = rng.integers(0, 256, len(ii)).astype(np.uint8)
    sq = rng.integers(0, 256, len(ii)).astype(np.uint8)
    ids = [f"p{k}" for k in range(n)]
    domains = [["Algebra"] if k % 2 else ["Geometry", "Algebra"] for k in range(n)]
    args = (ids, domains, ["Algebra", "Geometry"], lambda: [(ii, jj, tq, sq)], 127, 127, 5, 4)
    a = select_candidates(*args, seed=3)
    assert a.equals(select_candidates(*args, seed=3)) and not a.equals(
        select_candidates(*args, seed=4)
    )
    per_q = a.group_by("query_id").agg(
        pl.len(), pl.col("candidate_id").n_unique().alias("u"), pl.col("domain").first()
    )
    assert per_q["len"].to_list() == [15] * per_q.height and (per_q["u"] == 15).all()
    assert a.filter(pl.col("query_id") == pl.col("candidate_id")).height == 0
    assert per_q.group_by("domain").len().sort("domain")["len"].to_list() == [4, 4]
    both = a.filter(pl.col("group") == "both")
    assert ((both["topic"] > 127 / 255) & (both["summary"] > 127 / 255)).all()
    topic_only = a.filter(pl.col("group") == "topic_only")
    assert ((topic_only["topic"] > 127 / 255) & (topic_only["summary"] <= 127 / 255)).all()


def test_candidate_selection_is_the_same_whatever_the_chunks():
    """The stored pairs arrive a shard at a time, in any order of files: the selection must not
    depend on where the chunks are cut (counts add up; the chosen queries' groups are sorted)."""
    rng = np.random.default_rng(1)
    n = 80
    ii, jj = np.triu_indices(n, 1)
    keep = rng.random(len(ii)) < 0.6
    ii, jj = ii[keep], jj[keep]
    tq = rng.integers(0, 256, len(ii)).astype(np.uint8)
    sq = rng.integers(0, 256, len(ii)).astype(np.uint8)
    ids = [f"p{k}" for k in range(n)]
    domains = [["A"] if k % 3 else ["B", "A"] for k in range(n)]
    whole = select_candidates(
        ids, domains, ["A", "B"], lambda: [(ii, jj, tq, sq)], 127, 127, 4, 6, 7
    )
    cuts = np.sort(rng.choice(len(ii), 6, replace=False))
    pieces = [
        tuple(a[x] for a in (ii, jj, tq, sq)) for x in np.split(rng.permutation(len(ii)), cuts)
    ]
    passes = []

    def chunks():
        passes.append(1)
        return iter(pieces[::-1])

    cut = select_candidates(ids, domains, ["A", "B"], chunks, 127, 127, 4, 6, 7)
    assert whole.height == 2 * 6 * 12 and cut.equals(whole) and len(passes) == 2
    # no viable query: the second pass is skipped and the frame is empty, with its columns
    none = select_candidates(ids, domains, ["A"], chunks, 127, 127, 80, 6, 7)
    assert none.height == 0 and none.columns == whole.columns and len(passes) == 3


def test_selection_key_changes_with_everything_the_selection_reads():
    base = (
        ["s0.sig:ab", "s1.sig:cd"],
        ["p0", "p1"],
        [["A"], ["B", "A"]],
        ["A", "B"],
        9,
        8,
        5,
        4,
        0,
    )
    key = selection_key(*base)
    assert key == selection_key(*base) and len(key) == 32
    # a row's domains in another order select the same queries
    assert selection_key(*base[:2], [["A"], ["A", "B"]], *base[3:]) == key
    changed = [
        (["s0.sig:ab", "s1.sig:ce"], *base[1:]),
        (base[0], ["p0", "p2"], *base[2:]),
        (*base[:2], [["A"], ["B"]], *base[3:]),
        (*base[:3], ["B", "A"], *base[4:]),
    ]
    changed += [(*base[:x], base[x] + 1, *base[x + 1 :]) for x in range(4, 9)]
    keys = {selection_key(*c) for c in changed}
    assert key not in keys and len(keys) == len(changed)


def test_candidate_selection_known_answer_at_the_thresholds():
    """Signals exactly at a threshold are not relevant; one above are. Query 0 has exactly
    k = 2 candidates per group (viable); query 8 lacks a second 'both' (not viable)."""
    t_thr, s_thr = 100, 50
    pairs = [  # (i, j, topic quanta, summary quanta)
        (0, 1, 101, 50),  # topic-only: summary at its threshold
        (0, 2, 255, 0),  # topic-only
        (0, 3, 100, 51),  # summary-only: topic at its threshold
        (0, 4, 0, 200),  # summary-only
        (0, 5, 101, 51),  # both, one quantum above each
        (6, 0, 200, 60),  # both, stored with query 0 second
        (0, 7, 100, 50),  # neither
        (8, 9, 101, 51),  # both
        (8, 10, 200, 0),
        (11, 8, 200, 0),
        (1, 8, 0, 200),
        (2, 8, 0, 90),
    ]
    i, j, tq, sq = (np.array(c) for c in zip(*pairs, strict=True))
    tq, sq = tq.astype(np.uint8), sq.astype(np.uint8)
    counts = group_counts(12, i, j, tq, sq, t_thr, s_thr)
    assert counts[0].tolist() == [2, 2, 2] and counts[8].tolist() == [2, 2, 1]
    assert counts[1].tolist() == [1, 1, 0] and counts[7].tolist() == [0, 0, 0]
    ids = [f"p{r}" for r in range(12)]
    doms = [["A"]] * 12
    got = select_candidates(ids, doms, ["A"], lambda: [(i, j, tq, sq)], t_thr, s_thr, 2, 10, seed=0)
    assert set(got["query_id"]) == {"p0"}
    members = {
        g: sorted(got.filter(pl.col("group") == g)["candidate_row"].to_list())
        for g in ("topic_only", "summary_only", "both")
    }
    assert members == {"topic_only": [1, 2], "summary_only": [3, 4], "both": [5, 6]}
    six = got.filter(pl.col("candidate_row") == 6).row(0, named=True)
    assert six["topic"] == 200 / 255 and six["summary"] == 60 / 255
    # a quota past the pool takes every viable query exactly once
    rng = np.random.default_rng(0)
    ii, jj = np.triu_indices(40, 1)
    tq2, sq2 = (rng.integers(0, 256, len(ii)).astype(np.uint8) for _ in range(2))
    ids2 = [f"q{r}" for r in range(40)]
    viable = group_counts(40, ii, jj, tq2, sq2, 127, 127).min(axis=1) >= 3
    assert viable.sum() >= 10
    all_q = select_candidates(
        ids2, [["A"]] * 40, ["A"], lambda: [(ii, jj, tq2, sq2)], 127, 127, 3, 99, 1
    )
    assert all_q.group_by("query_id").len()["len"].to_list() == [9] * int(viable.sum())
    assert sorted(all_q["query_row"].unique().to_list()) == np.flatnonzero(viable).tolist()


# ------------------------------------------------------------------ rescale properties


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_subnormal=False),
        min_size=1,
        max_size=60,
    )
)
def test_rescale_lies_exactly_in_0_5_and_keeps_order(strengths):
    s = np.asarray(strengths)
    r = rescale(s)
    assert r.shape == s.shape and np.all((r >= 0.0) & (r <= 5.0))
    if s.max() - s.min() < 1e-12:
        assert np.all(r == 2.5)
        return
    assert r.min() == 0.0 and r.max() == 5.0
    assert r[np.argmax(s)] == 5.0 and r[np.argmin(s)] == 0.0
    order = np.argsort(s, kind="stable")
    assert np.all(np.diff(r[order]) >= 0)  # the order of the strengths is kept


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=2, max_value=40), st.integers(min_value=0, max_value=2**32 - 1))
def test_ratings_of_random_tournaments_are_in_range(n, seed):
    rng = np.random.default_rng(seed)
    comps = [tuple(rng.choice(n, 2, replace=False)) for _ in range(int(rng.integers(0, 4 * n)))]
    r = rescale(fit(n, comps))
    assert np.all((r >= 0) & (r <= 5)) and (r.max() == 5.0 or np.all(r == 2.5))


# ------------------------------------------------------------------ the efficient policy


def test_soft_estimation_recovers_strengths_and_bias():
    from saber_assets.ratings.soft import fit_soft

    rng = np.random.default_rng(0)
    s = rng.normal(0, 1.5, 30)
    s -= s.mean()
    first = rng.integers(0, 30, 400)
    second = (first + rng.integers(1, 30, 400)) % 30
    d = s[first] - s[second] + 0.7  # noise-free measurements with a position bias
    est, bias, cov = fit_soft(30, first, second, d, prior=1e-6, bias_prior=1e-6)
    assert np.allclose(est, s, atol=1e-4) and abs(bias - 0.7) < 1e-4
    assert cov.shape == (30, 30) and np.all(np.diag(cov) > 0)


def _soft_judge(s, sigma, bias, seed):
    r = np.random.default_rng(seed)

    def judge(first, second):
        return 1 / (1 + np.exp(-(s[first] - s[second] + bias + r.normal(0, sigma, len(first)))))

    return judge


def test_efficient_beats_swiss_20_with_half_the_calls_in_simulation():
    from saber_assets.tournament.simulate import estimate

    s = np.random.default_rng(3).normal(0, 1.5, 150)

    def binary():
        judge = _soft_judge(s, 1.0, 0.5, 1)
        return lambda f, g: (judge(f, g) > 0.5).astype(float)

    swiss = estimate("swiss", 150, binary(), 1500, 0)
    eff = estimate("efficient", 150, _soft_judge(s, 1.0, 0.5, 1), 750, 0)
    assert kendalltau(eff, s).statistic >= kendalltau(swiss, s).statistic
    # binary judgments only: efficient pairs like Swiss, so it is never worse
    assert np.allclose(
        estimate("efficient", 150, binary(), 600, 0), estimate("swiss", 150, binary(), 600, 0)
    )


def test_simulation_driver_and_engine_pair_alike():
    from saber_assets.tournament.simulate import SIM_QUERY, estimate

    s = np.random.default_rng(4).normal(0, 1.5, 20)
    cands = [f"c{k}" for k in range(20)]
    strength = dict(zip(cands, s, strict=True))

    class SoftJudge:
        backend, model, version = "sim", "sim", "sim/v1"

        def compare_batch(self, items):
            out = []
            for _, a, b in items:
                p = float(1 / (1 + np.exp(-(strength[a] - strength[b]))))
                out.append(Outcome(1 if p >= 0.5 else 2, raw="1", p_first=p))
            return out

    store = MemoryStore()
    run_tournament(
        [TournamentQuery(SIM_QUERY, "q", cands, cands)], SoftJudge(), store, 4, 9, "efficient"
    )
    engine_pairs = [
        (j.round, int(j.shown_first[1:]), int((j.b if j.shown_first == j.a else j.a)[1:]))
        for j in next(iter(store.rows.values()))
    ]
    trace = []
    estimate(
        "efficient",
        20,
        lambda f, g: 1 / (1 + np.exp(-(s[f] - s[g]))),
        len(engine_pairs),
        9,
        trace=trace,
    )
    assert sorted(engine_pairs) == sorted((r, f, g) for r, f, g, _ in trace)


def test_efficient_tournament_resumes_without_new_calls_and_rates_softly():
    qs, strength = _queries(nq=2, n=12, seed=2)

    class Soft(SimJudge):
        def answer(self, a, b) -> Outcome:
            p = float(1 / (1 + np.exp(-(self.strength[a] - self.strength[b]))))
            return Outcome(1 if p >= 0.5 else 2, raw="x", p_first=p)

    store = DuckDBJudgmentStore(Warehouse(path=":memory:").connect)
    crashing = Soft(strength, crash_after=20)
    with pytest.raises(RuntimeError, match="killed"):
        run_tournament(qs, crashing, store, 6, 3, "efficient", chunk=5)
    resumed = Soft(strength)
    _, stats = run_tournament(qs, resumed, store, 6, 3, "efficient", chunk=5)
    asked = [(q, frozenset((a, b))) for q, a, b in crashing.seen + resumed.seen]
    assert len(asked) == len(set(asked)) and stats["replayed"] >= 20
    again = Soft(strength)
    run_tournament(qs, again, store, 6, 3, "efficient", chunk=5)
    assert again.calls == 0
    judged = store.frame(store_keys(store)[0])
    assert judged["p_first"].is_not_null().all()
    cands = pl.DataFrame(
        [
            {"query_id": q.query_id, "candidate_id": c, "position": k}
            for q in qs
            for k, c in enumerate(q.candidates)
        ]
    )
    rated = rate(cands, judged, prior=CHOIX, soft=True)
    for q in qs:
        r = rated.filter(pl.col("query_id") == q.query_id)
        truth = [strength[c] for c in r["candidate_id"]]
        assert kendalltau(r["rating"].to_numpy(), truth).statistic > 0.8


def test_rate_soft_measurements_loser_mapping_and_queries_without_judgments():
    from saber_assets.ratings.rate import comparisons, soft_measurements

    cands = ["c3", "c1", "c2", "c0"]  # ids deliberately not in sorted order
    j = pl.DataFrame(
        {
            "query": ["q"] * 6,
            "a": ["c3", "c1", "c2", "c0", "c1", "c3"],
            "b": ["c1", "c2", "c0", "c3", "c0", "c0"],
            # a failure first, then winners as a and as b (b sorting before and after a)
            "winner": [None, "c2", "c2", "c3", "c1", "c0"],
            "shown_first": ["c1", "c2", "c2", "c0", "c0", "c0"],
            "p_first": [None, 0.9, 0.8, 0.3, None, 0.6],
        }
    )
    # the failed judgment is skipped, not the ones after it; the loser is the other candidate
    assert comparisons(j, cands) == [(2, 1), (2, 3), (0, 3), (1, 3), (3, 0)]
    with pytest.raises(ValueError, match="names winner 'c9'"):
        comparisons(j.with_columns(pl.lit("c9").alias("winner")), cands)
    first, second, p = soft_measurements(j, cands)
    # rows with a probability and a decision; "second" is the one not shown first
    assert first.tolist() == [2, 2, 3, 3] and second.tolist() == [1, 3, 0, 0]
    assert p.tolist() == [0.9, 0.8, 0.3, 0.6] and first.dtype.kind == "i"
    empty = soft_measurements(j.drop("p_first"), cands)
    assert [len(x) for x in empty] == [0, 0, 0] and empty[0].dtype.kind == "i"

    rows = pl.DataFrame({"query_id": ["q"] * 4 + ["r"] * 2, "candidate_id": cands + ["x", "y"],
                         "position": [0, 1, 2, 3, 0, 1]})  # fmt: skip
    out = rate(rows, j, prior=CHOIX)
    games = dict(zip(out["candidate_id"], out["games"], strict=True))
    assert games == {"c3": 2, "c1": 2, "c2": 2, "c0": 4, "x": 0, "y": 0}
    by = {c: r for c, r in zip(out["candidate_id"], out["rating"], strict=True)}
    assert by["c2"] == 5.0 and by["c0"] == 0.0  # won both / won one of four
    assert by["x"] == by["y"] == 2.5  # a query with no judgment: no information, the middle
    soft = rate(rows, j, prior=CHOIX, soft=True)
    assert soft["rating"].is_between(0, 5).all() and soft.height == rows.height
    # the probabilities move the soft strengths away from the decisions-only fit
    assert not np.allclose(soft["strength"][:4].to_numpy(), out["strength"][:4].to_numpy())
    # a query's ratings never depend on the other queries rated with it
    both = j.vstack(pl.DataFrame({"query": ["r"], "a": ["x"], "b": ["y"], "winner": ["y"],
                                  "shown_first": ["x"], "p_first": [None]}, schema=j.schema))  # fmt: skip
    together = rate(rows, both, prior=CHOIX)
    for qid in ("q", "r"):
        alone = rate(rows.filter(pl.col("query_id") == qid), both, prior=CHOIX)
        part = together.filter(pl.col("query_id") == qid)
        assert part["strength"].to_list() == alone["strength"].to_list(), qid
    none = rate(rows, j.clear(), prior=CHOIX)
    assert none["rating"].to_list() == [2.5] * 6 and none["games"].to_list() == [0] * 6


def _closest_oracle(order, keys, played):
    """The docstring's rule, literally: the lowest unpaired candidate meets the unpaired, unmet
    one with the smallest key gap (ties: the earlier), or sits out."""
    free = set(range(len(order)))
    pairs = []
    for p in range(len(order)):
        if p not in free:
            continue
        free.discard(p)
        options = [
            (abs(keys[q] - keys[p]), q)
            for q in sorted(free)
            if frozenset((int(order[p]), int(order[q]))) not in played
        ]
        if options:
            q = min(options)[1]
            free.discard(q)
            pairs.append((int(order[p]), int(order[q])))
    return pairs


def test_greedy_closest_equals_the_rule_with_negative_keys_and_met_pairs():
    """Adaptive pairing passes strength estimates, negative ones included."""
    from saber_assets.tournament.swiss import greedy_closest

    rng = np.random.default_rng(17)
    for _ in range(200):
        n = int(rng.integers(2, 13))
        order = rng.permutation(n)
        keys = np.sort(rng.normal(-1.0, 2.0, n).round(1))
        played = {
            frozenset(map(int, rng.choice(n, 2, replace=False))) for _ in range(rng.integers(0, n))
        }
        assert greedy_closest(order, keys, played) == _closest_oracle(order, keys, played)


def test_greedy_closest_known_answers():
    from saber_assets.tournament.swiss import greedy_closest

    order = np.array([0, 1, 2, 3])
    # the adjacent candidate when it is the closest
    assert greedy_closest(order, np.array([0.0, 0, 1, 1]), set()) == [(0, 1), (2, 3)]
    # equal gaps: the earlier in the order wins the tie (the docstring's rule)
    assert greedy_closest(np.array([0, 1, 2]), np.array([0.0, 1, 1]), set()) == [(0, 1)]
    # a met opponent is skipped for the next closest; nobody left: sit out
    played = {frozenset((0, 1))}
    assert greedy_closest(order, np.array([0.0, 0, 1, 1]), played) == [(0, 2), (1, 3)]
    assert greedy_closest(np.array([0, 1]), np.zeros(2), played) == []
    # the order, not the ids, decides who picks first
    assert greedy_closest(np.array([3, 2, 1, 0]), np.array([0.0, 0, 5, 5]), set()) == [
        (3, 2), (1, 0),
    ]  # fmt: skip


def test_a_changed_candidate_set_keeps_its_old_judgments_out_of_the_tournament():
    """The same queries with other candidates (new thresholds, a changed pool), under the same
    run key: pairs that come back are replayed, the rest asked; the tournament's table holds only
    the judgments it stands on, so the ratings never meet a candidate the query no longer has."""
    qs, strength = _queries(nq=2, n=16)
    store = DuckDBJudgmentStore(Warehouse(path=":memory:").connect)
    key = "k"
    run_tournament(qs, SimJudge(strength), store, rounds=4, seed=7, key=key)
    changed = []
    for q in qs:  # half the candidates replaced
        new = [f"{c}-new" for c in q.candidates[8:]]
        for c in new:
            strength[c] = 0.0
        kept = q.candidates[:8] + new
        changed.append(TournamentQuery(q.query_id, q.text, kept, kept))
    _, stats = run_tournament(changed, SimJudge(strength), store, rounds=4, seed=7, key=key)
    current = store.frame(key, stats["used"])
    assert store.count(key) > current.height == len(stats["used"]) == 2 * 4 * 8
    for q in changed:
        mine = current.filter(pl.col("query") == q.query_id)
        assert set(mine["a"]) | set(mine["b"]) <= set(q.candidates)
    cands = pl.DataFrame(
        [(q.query_id, c, k) for q in changed for k, c in enumerate(q.candidates)],
        schema=["query_id", "candidate_id", "position"], orient="row",
    )  # fmt: skip
    assert rate(cands, current, DEFAULT_PRIOR).height == cands.height
    with pytest.raises(KeyError):  # the whole store: judgments of candidates now gone
        rate(cands, store.frame(key), DEFAULT_PRIOR)


def test_position_bias_fails_a_judge_that_favours_a_position_and_passes_a_fair_one():
    from saber_assets.tournament.engine import position_bias

    def judgments(first_wins: int, n: int, failed: int = 0) -> pl.DataFrame:
        rows = [{"shown_first": "x", "winner": "x" if k < first_wins else "y"} for k in range(n)]
        rows += [{"shown_first": "x", "winner": None}] * failed
        return pl.DataFrame(rows, schema={"shown_first": pl.String, "winner": pl.String})

    band = (0.4, 0.6)
    always = position_bias(judgments(40, 40, failed=5), band)  # the bundled 135M model
    assert always.biased and always.decided == 40 and always.low > 0.9
    assert "won 40 of 40 judgments (100.0%" in always.describe()
    assert position_bias(judgments(0, 40), band).biased  # always the second, as bad
    fair = position_bias(judgments(205, 400), band)
    assert not fair.biased and 0.45 < fair.low < fair.share < fair.high < 0.57
    # a few judgments cannot convict a judge: 7 of 10 first is inside the doubt
    assert not position_bias(judgments(7, 10), band).biased
    assert not position_bias(judgments(0, 0, failed=3), band).biased
    with pytest.raises(ValueError, match="position_bias_band"):
        from saber_assets.config import TournamentConfig

        TournamentConfig(position_bias_band=(0.6, 0.9))


class FirstShownJudge(SimJudge):
    """Always picks the candidate shown first: every pair judged both ways disagrees."""

    def answer(self, a, b) -> Outcome:
        return Outcome(1, raw="1")


def test_order_check_judges_a_seeded_share_again_swapped_and_reports_agreement():
    from saber_assets.tournament.engine import order_checked, order_consistency, swapped_key

    qs, strength = _queries(nq=4, n=20)
    store = DuckDBJudgmentStore(Warehouse(path=":memory:").connect)
    judge = SimJudge(strength)
    standings, stats = run_tournament(
        qs, judge, store, rounds=5, seed=3, order_check_share=0.3, key="k"
    )
    plain, _ = run_tournament(qs, SimJudge(strength), MemoryStore(), rounds=5, seed=3, key="k")
    for q in qs:  # a check is a measurement: the standings are the unchecked tournament's
        assert sorted(standings[q.query_id].comparisons) == sorted(plain[q.query_id].comparisons)
    main, other = store.frame("k"), store.frame(swapped_key("k"))
    want = [
        r for r in main.select("query", "round", "a", "b").iter_rows()
        if order_checked(3, *r, 0.3)
    ]  # fmt: skip
    assert 0.15 * main.height < len(want) < 0.45 * main.height
    assert sorted(other.select("query", "round", "a", "b").iter_rows()) == sorted(want)
    both = main.join(other, on=["query", "round", "a", "b"], suffix="_2")
    assert (both["shown_first"] != both["shown_first_2"]).all()  # the other order, really
    assert stats["swapped_requested"] == len(want) == judge.calls - stats["requested"]
    joined = main.join(
        other.select("query", "round", "a", "b", pl.col("winner").alias("swapped_winner")),
        on=["query", "round", "a", "b"], how="left",
    )  # fmt: skip
    assert order_consistency(joined)[:2] == (len(want), len(want))  # a consistent judge
    # a judge that always picks the first shown disagrees with itself on every checked pair
    store2 = MemoryStore()
    run_tournament(qs, FirstShownJudge(strength), store2, rounds=5, seed=3, order_check_share=0.3, key="k")  # fmt: skip
    rows = lambda k: pl.DataFrame([vars(j) for j in store2.load(k)])  # noqa: E731
    joined = rows("k").join(
        rows(swapped_key("k")).select("query", "round", "a", "b", pl.col("winner").alias("swapped_winner")),
        on=["query", "round", "a", "b"], how="left",
    )  # fmt: skip
    agree, checked, lo, hi = order_consistency(joined)
    assert checked > 0 and agree == 0 and hi < 0.1
    # a resumed run asks none of the checks again
    again = SimJudge(strength)
    run_tournament(qs, again, store, rounds=5, seed=3, order_check_share=0.3, key="k")
    assert again.calls == 0


def test_both_orders_counts_a_disagreement_as_a_tie():
    from saber_assets.ratings.rate import pair_outcomes

    qs, strength = _queries(nq=2, n=12)
    store = MemoryStore()
    standings, stats = run_tournament(
        qs, FirstShownJudge(strength), store, rounds=4, seed=1, both_orders=True, key="k"
    )
    for standing in standings.values():  # every pair disagreed with itself: ties, half a win each
        assert standing.comparisons == [] and len(standing.ties) > 0
        assert standing.wins.sum() == len(standing.ties)
    consistent, _ = run_tournament(
        qs, SimJudge(strength), MemoryStore(), rounds=4, seed=1, both_orders=True, key="k"
    )
    assert all(s.ties == [] and s.comparisons for s in consistent.values())
    frame = pl.DataFrame(
        {"a": ["x", "x", "y"], "b": ["y", "z", "z"], "winner": ["x", None, "y"],
         "swapped_winner": ["y", "z", "y"]}
    )  # fmt: skip
    assert pair_outcomes(frame, ["x", "y", "z"], both_orders=True) == ([(2, 0), (1, 2)], [(0, 1)])
    assert pair_outcomes(frame, ["x", "y", "z"]) == ([(0, 1), (1, 2)], [])
