"""Known answers for the leaderboard's paired tests, rank intervals and robustness measures."""

import numpy as np
import polars as pl
import pytest

from saber_assets.leaderboard.significance import (
    beats,
    flipped_pairs,
    half_split_taus,
    holm,
    kendall_tau,
    paired_tests,
    pvalue_matrix,
    rank_intervals,
    rescore,
    score_matrix,
)
from saber_assets.runs.metrics import bootstrap_ci, bootstrap_means


def test_identical_systems_are_never_significantly_different():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, 200)
    m = np.stack([a, a.copy(), rng.uniform(0, 1, 200)], axis=1)
    t = paired_tests(m, ["x", "y", "z"], resamples=2000, seed=0)
    xy = t.filter((pl.col("a") == "x") & (pl.col("b") == "y")).row(0, named=True)
    assert xy["p_ttest"] == 1.0 and xy["p_randomization"] == 1.0 and xy["better"] is None


def test_a_system_better_on_every_query_by_a_margin_is_significant_at_30_queries():
    rng = np.random.default_rng(2)
    base = rng.uniform(0.2, 0.7, 30)
    m = np.stack([base + 0.05, base], axis=1)
    t = paired_tests(m, ["better", "worse"], resamples=5000, seed=0).row(0, named=True)
    assert t["better"] == "better" and t["p_randomization_holm"] < 1e-3
    assert t["p_ttest"] == 0.0 and t["mean_diff"] == pytest.approx(0.05)
    assert beats(paired_tests(m, ["better", "worse"], 5000, 0)) == {"better": ["worse"]}
    # reversed columns: the same pair, the winner named from the other side
    t2 = paired_tests(m[:, ::-1], ["worse", "better"], 5000, 0).row(0, named=True)
    assert t2["better"] == "better" and t2["mean_diff"] == pytest.approx(-0.05)
    # the randomization test is seeded: the same p-value twice
    again = paired_tests(m, ["better", "worse"], 5000, 0).row(0, named=True)
    assert again["p_randomization"] == t["p_randomization"]


def test_holm_changes_a_borderline_p_exactly_as_its_formula_says():
    # sorted 0.01, 0.03, 0.04 -> 0.01*3, 0.03*2, max(0.04*1, 0.06): 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.04]) == pytest.approx([0.04])  # one test: unchanged
    assert holm([0.5, 0.6]).tolist() == [1.0, 1.0]  # capped
    assert holm([]).size == 0
    # a borderline pair: significant alone (p < 0.05), not after correction over three pairs
    rng = np.random.default_rng(5)
    m = rng.uniform(0, 1, (40, 3))
    t = paired_tests(m, ["a", "b", "c"], 2000, 0)
    raw = np.asarray(t["p_randomization"].to_list())
    assert t["p_randomization_holm"].to_list() == pytest.approx(holm(raw).tolist())
    pm = pvalue_matrix(t, ["a", "b", "c"], "p_randomization_holm")
    assert np.allclose(pm, pm.T) and np.all(np.diag(pm) == 1)


def test_rank_intervals_share_the_resamples_and_say_ties_honestly():
    rng = np.random.default_rng(3)
    n = 100
    strong = rng.uniform(0.7, 0.9, n)
    m = np.stack([strong, strong - 0.001 + rng.normal(0, 0.02, n), rng.uniform(0, 0.2, n)], 1)
    r = rank_intervals(m, ["a", "b", "c"], resamples=500, seed=0)
    by = {x["retriever"]: x for x in r.iter_rows(named=True)}
    assert by["c"]["rank_ci"] == "3"  # always last
    assert by["a"]["rank_ci"] == "1–2" and by["b"]["rank_ci"] == "1–2"  # the top is a toss-up
    # the same query sets for every system: a vector's resample means are the matrix column's
    assert np.allclose(bootstrap_means(m, 50, 7)[:, 1], bootstrap_means(m[:, 1], 50, 7), 0, 1e-15)
    # bootstrap_ci keeps its numbers (it reads its interval off the exposed means)
    lo, hi = bootstrap_ci(m[:, 0], 500, 0)
    assert (lo, hi) == tuple(np.quantile(bootstrap_means(m[:, 0], 500, 0), [0.025, 0.975]))


def test_kendall_tau_and_flips():
    assert kendall_tau([3, 2, 1], [30, 20, 10]) == 1.0
    assert kendall_tau([3, 2, 1], [1, 2, 3]) == -1.0
    assert flipped_pairs(["a", "b", "c"], [3, 2, 1], [3, 1, 2]) == ["b > c"]
    assert kendall_tau([1, 1], [2, 2]) == 1.0


def _runs(systems: dict[str, list[list[float]]]) -> pl.DataFrame:
    rows = []
    for name, per_query in systems.items():
        for q, scores in enumerate(per_query):
            rows.append({"retriever": name, "query_id": f"q{q}", "setting": "statement-full",
                         "failed": False, "scores": scores, "ndcg": None})  # fmt: skip
    return pl.DataFrame(rows)


def test_a_ranking_that_does_not_depend_on_the_scale_keeps_tau_1_under_every_rescoring():
    rng = np.random.default_rng(4)
    rel = {f"q{q}": sorted(rng.uniform(0, 5, 12).tolist(), reverse=True) for q in range(20)}
    perfect = [list(rel[f"q{q}"]) for q in range(20)]  # scores = the grades
    swapped = [[r[1], r[0], *r[2:]] for r in perfect]  # the top two exchanged
    reverse = [[-x for x in r] for r in perfect]
    runs = _runs({"perfect": perfect, "swapped": swapped, "reverse": reverse})
    names = ["perfect", "reverse", "swapped"]
    base = None
    for t in ("exponential", "linear", "scale3", "ranks"):
        scored = rescore(runs, rel, 10, "linear" if t == "exponential" else t)
        if t == "exponential":
            from saber_assets.runs.metrics import ndcg_at_k

            scored = runs.with_columns(pl.Series("ndcg", [
                ndcg_at_k(s, rel[q], 10) for q, s in runs.select("query_id", "scores").iter_rows()
            ]))  # fmt: skip
        qids, got_names, m = score_matrix(scored, "statement-full")
        assert got_names == names and len(qids) == 20
        means = m.mean(axis=0)
        if base is None:
            base = means
        assert kendall_tau(base, means) == 1.0, t
        assert flipped_pairs(names, base, means) == []
    with pytest.raises(ValueError, match="unknown transform"):
        rescore(runs, rel, 10, "log")


def test_half_splits_agree_with_themselves_when_the_gap_is_wide():
    rng = np.random.default_rng(0)
    m = np.stack([rng.uniform(0.6, 1, 60), rng.uniform(0.3, 0.6, 60), rng.uniform(0, 0.3, 60)], 1)
    assert np.all(half_split_taus(m, 50, 0) == 1.0)
    noise = rng.uniform(0, 1, (60, 4))
    assert half_split_taus(noise, 50, 0).mean() < 0.6


def test_tie_groups_open_where_the_paired_test_separates_a_system_from_the_groups_top():
    import polars as pl

    from saber_assets.leaderboard.assemble import tie_groups

    board = pl.DataFrame(
        {"setting": ["s"] * 4 + ["t"] * 2, "retriever": ["a", "b", "c", "d", "a", "b"],
         "ndcg@10": [0.9, 0.85, 0.6, 0.58, 0.5, 0.4]}
    )  # fmt: skip
    # a beats c and d, not b; b beats d only; c and d are not separable; in t nothing is
    tests = pl.DataFrame(
        {"setting": ["s"] * 4 + ["t"], "domain": ["Overall"] * 5,
         "a": ["a", "a", "b", "a", "a"], "b": ["c", "d", "d", "b", "b"],
         "better": ["a", "a", "b", None, None]}
    )  # fmt: skip
    groups = tie_groups(board, tests, "ndcg@10")
    got = {(s, r): g for s, r, g in groups.iter_rows()}
    assert got == {("s", "a"): 1, ("s", "b"): 1, ("s", "c"): 2, ("s", "d"): 2,
                   ("t", "a"): 1, ("t", "b"): 1}  # fmt: skip


def test_many_systems_are_still_separable_past_the_monte_carlo_floor():
    """40 systems (780 pairs): a clear gap between neighbours must survive Holm, which a p at
    the Monte Carlo floor (2/(resamples + 1) × 780) never would."""
    from saber_assets.leaderboard.significance import paired_tests

    rng = np.random.default_rng(0)
    n, k = 1000, 40
    base = rng.uniform(0.2, 0.8, size=(n, 1))
    m = np.clip(base + 0.02 * np.arange(k)[None, :] + 0.02 * rng.standard_normal((n, k)), 0, 1)
    t = paired_tests(m, [f"s{i:02d}" for i in range(k)], resamples=1000)
    assert t.height == 780 and t["better"].is_not_null().sum() >= 700
    assert (t["p_randomization"] > 0).all()


@pytest.mark.parametrize("seed", [3, 4])
def test_both_paired_tests_are_two_sided_and_match_independent_computations(seed):
    """Either order of a pair gives the same p-values, and each equals what scipy's t-test and
    an exact enumeration of every sign flip give (#75: made one-sided, the suite stayed green)."""
    from itertools import product

    from scipy.stats import ttest_rel

    from saber_assets.leaderboard.significance import paired_pvalues

    rng = np.random.default_rng(seed)
    a = rng.uniform(0.2, 0.8, 12)
    b = a + rng.normal(0.06, 0.08, 12)  # b better on average, not on every query
    d = a - b
    exact = np.mean(
        [
            abs(np.mean(np.array(s) * d)) >= abs(d.mean()) - 1e-12
            for s in product((1, -1), repeat=12)
        ]
    )  # all 4,096 flips
    p_t, p_r = paired_pvalues(a, b, 20_000, 0)
    q_t, q_r = paired_pvalues(b, a, 20_000, 0)
    assert p_t == pytest.approx(ttest_rel(a, b).pvalue) == pytest.approx(q_t)
    assert 0.001 < exact < 0.5  # a case where a one-sided test would differ
    assert p_r == pytest.approx(exact, abs=0.01) and q_r == pytest.approx(exact, abs=0.01)


def test_decisions_near_their_holm_threshold_do_not_turn_on_the_seed():
    """12 systems a step apart on 100 queries: with the flips fixed at 1,000, another seed
    turns a `better` decision; drawn again near the threshold (up to 1,000,000), three seeds
    decide every pair alike, and the pairs drawn again say so (#75)."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=(100, 1))
    m = np.clip(base + 0.01 * np.arange(12)[None, :] + 0.05 * rng.standard_normal((100, 12)),
                0, 1)  # fmt: skip
    names = [f"s{i:02d}" for i in range(12)]

    def decisions(seed: int, grow: bool) -> list:
        t = paired_tests(m, names, 1000, seed, max_resamples=1_000_000 if grow else 1000)
        return t["better"].to_list()

    fixed = [decisions(s, False) for s in (1, 2, 3)]
    assert fixed[0] != fixed[1] or fixed[0] != fixed[2]
    t = paired_tests(m, names, 1000, 1)
    assert t["better"].to_list() == decisions(2, True) == decisions(3, True)
    grown = t.filter(pl.col("randomization_resamples") > 1000)
    assert grown.height and not t["near_threshold"].any()


def test_which_p_values_are_drawn_again():
    """Near its Holm threshold within three Monte-Carlo standard errors of a two-sided p: drawn
    again; under the floor (the normal tail) only where it is not an order of magnitude below
    the threshold."""
    from saber_assets.leaderboard.significance import near_holm_threshold

    # two pairs: thresholds 0.025 (the smaller p) and 0.05; SE of p = 0.02 at 10,000 flips is
    # 2·√(0.01·0.99/10,000) ≈ 0.002
    near = near_holm_threshold(np.array([0.021, 0.2]), np.array([10_000, 10_000]), 0.05)
    assert near.tolist() == [True, False]
    far = near_holm_threshold(np.array([0.010, 0.2]), np.array([10_000, 10_000]), 0.05)
    assert far.tolist() == [False, False]
    # under the floor of 10,000 flips (2e-4): 1e-4 lies an order of magnitude below 0.025
    floor = near_holm_threshold(np.array([1e-4, 0.2]), np.array([10_000, 10_000]), 0.05)
    assert floor.tolist() == [False, False]
    # with 780 pairs the first threshold is 6.4e-5: a normal-tail 1e-5 is drawn again
    p = np.full(780, 0.5)
    p[0] = 1e-5
    assert near_holm_threshold(p, np.full(780, 10_000), 0.05)[0]


def test_a_pair_at_alpha_is_drawn_as_undecided():
    """Two systems whose paired test lands at α, its flips capped: the pair is marked
    near_threshold, each row's `undecided` names the other, and the markdown board says
    "undecided with" where a superscript would claim a decision."""
    import polars as pl

    from saber_assets.leaderboard.board_markdown import superscript_board
    from saber_assets.leaderboard.significance import paired_tests, undecided_column

    rng = np.random.default_rng(0)
    for _ in range(200):  # a difference whose p sits near 0.05
        d = rng.normal(0.1, 0.25, 30)
        base = rng.uniform(0.2, 0.6, 30)
        matrix = np.c_[base + d, base, base - 0.5]
        tests = paired_tests(matrix, ["x", "y", "z"], resamples=400, seed=1, max_resamples=400)
        pair = tests.filter((pl.col("a") == "x") & (pl.col("b") == "y"))
        if pair["near_threshold"][0]:
            break
    else:
        pytest.fail("no pair near α in 200 draws")
    tests = tests.with_columns(setting=pl.lit("s"), domain=pl.lit("Overall"))
    column = undecided_column(tests)
    shown = dict(zip(column["retriever"], column["undecided"], strict=True))
    assert shown["x"] == "y" and shown["y"] == "x"
    board = pl.DataFrame({"retriever": ["x", "y"], "setting": ["s", "s"],
                          "ndcg@10": [0.6, 0.5], "rank_ci": ["1–2", "1–2"]}).join(
        column, on=["setting", "retriever"], how="left")  # fmt: skip
    text = superscript_board(board)
    assert "| a | x | 0.6000 (undecided with b) |" in text
    assert "| b | y | 0.5000 (undecided with a) |" in text


def test_a_low_estimate_near_its_threshold_is_drawn_again():
    """The sample's full-full Algebra pair: p 0.0006 at 10,000 flips against a Holm threshold of
    0.05 / 28. Its error taken at p alone claimed a decision (and 2,000,000 flips put p at
    0.0023, over the threshold); taken at the threshold, it is drawn again."""
    from saber_assets.leaderboard.significance import near_holm_threshold

    p = np.array([0.0006] + [0.5] * 27)
    near = near_holm_threshold(p, np.full(28, 10_000), 0.05)
    assert near[0] and not near[1:].any()
    # far below its threshold the decision stands without more draws
    assert not near_holm_threshold(np.array([1e-6] + [0.5] * 27), np.full(28, 10_000), 0.05)[0]
