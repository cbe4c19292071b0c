"""Leaderboard intervals over the queries and the judgments (leaderboard/joint.py)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from saber_assets.benchmark.data import JUDGMENT_SCHEMA, Benchmark, BenchmarkFormatError
from saber_assets.leaderboard import joint
from saber_assets.leaderboard.assemble import assemble_board, separable_pairs
from saber_assets.leaderboard.joint_coverage import coverage
from saber_assets.ratings.bradley_terry import Prior, fit, information, rescale
from saber_assets.runs.metrics import bootstrap_means, dcg_weights, gains, ndcg_at_k


@pytest.mark.parametrize("ties", ["average", "stable", "numpy"])
def test_dcg_weights_score_like_ndcg(ties):
    rng = np.random.default_rng(3)
    for _ in range(50):
        scores = rng.integers(0, 6, 30).astype(float)  # many ties
        rel = rng.uniform(0, 5, 30)
        g = gains(rel, "exponential")
        ideal = np.sort(g)[::-1][:10] @ (1 / np.log2(np.arange(2, 12)))
        assert dcg_weights(scores, 10, ties) @ g / ideal == pytest.approx(
            ndcg_at_k(scores, rel, 10, "exponential", ties), abs=1e-12
        )


def test_information_is_the_negative_hessian_of_the_log_posterior():
    rng = np.random.default_rng(0)
    comps = [tuple(rng.choice(8, 2, replace=False)) for _ in range(40)]
    prior = Prior("l2", c=1.0)
    theta = fit(8, comps, prior)

    def log_post(t):
        return sum(-np.logaddexp(0, -(t[w] - t[lo])) for w, lo in comps) - 0.5 * t @ t

    h, eps = np.zeros((8, 8)), 1e-4
    for i in range(8):
        for j in range(8):
            e_i, e_j = np.eye(8)[i] * eps, np.eye(8)[j] * eps
            h[i, j] = -(
                log_post(theta + e_i + e_j) - log_post(theta + e_i - e_j)
                - log_post(theta - e_i + e_j) + log_post(theta - e_i - e_j)
            ) / (4 * eps * eps)  # fmt: skip
    assert information(8, comps, theta, prior) == pytest.approx(h, abs=1e-5)


def test_posterior_draws_have_the_inverse_information_as_covariance():
    rng = np.random.default_rng(1)
    comps = [tuple(rng.choice(6, 2, replace=False)) for _ in range(30)]
    (post,) = joint.grade_posteriors([(6, comps)])
    draws = post.draw(np.random.default_rng(2), 200_000)
    cov = np.linalg.inv(information(6, comps, post.theta))
    assert np.cov(draws) == pytest.approx(cov, abs=0.01)
    assert draws.mean(axis=1) == pytest.approx(post.theta, abs=0.01)


def test_joint_intervals_cover_the_true_differences_where_query_only_ones_do_not():
    """200 seeded simulated benchmarks, a noisy judge (κ = 1): the joint intervals cover the
    true differences, the query-only ones under-cover."""
    c = coverage(simulations=200, candidates=60, rounds=10, kappa=1.0)
    assert c.cells == 600
    assert c.joint >= 0.93, c
    assert c.query_only < 0.85, c
    assert c.wrong_order_joint <= 0.025, c  # never a confident call the wrong way round
    # each system's own level: the judge pulls the raw score down, the corrected score
    # (2t − mean t*, which the joint interval is centred on) undoes most of the pull
    assert c.error_corrected < 0.5 * c.error_raw, c
    assert c.level_joint > 0.75 and c.level_query_only < 0.1, c


def test_without_the_judgment_draws_the_joint_intervals_under_cover(monkeypatch):
    """The resampling of the judgments is what buys the coverage: drawing every query's grades
    as the fitted ones (no judge noise) leaves the joint intervals as short as the query-only."""
    monkeypatch.setattr(
        joint.GradePosterior, "draw",
        lambda self, rng, draws: np.repeat(self.theta[:, None], draws, axis=1),
    )  # fmt: skip
    c = coverage(simulations=40, candidates=60, rounds=10, kappa=1.0)
    assert c.joint < 0.85, c


def small_bench(tmp_path, with_judgments: bool = True, seed: int = 0):
    """A benchmark of 12 queries × 10 candidates graded by a BT fit of random judgments, and
    two systems' runs over it (one close to the truth, one noisy)."""
    rng = np.random.default_rng(seed)
    docs = pl.DataFrame({"id": [f"d{i}" for i in range(40)],
                         "problem": [f"p{i}" for i in range(40)], "solution": ["s"] * 40})  # fmt: skip
    q_rows, j_rows, run_rows = [], [], []
    for q in range(12):
        cands = rng.choice(40, 10, replace=False).tolist()
        theta = rng.standard_normal(10) * 2
        comps = []
        for r in range(30):
            a, b = rng.choice(10, 2, replace=False)
            win = a if rng.random() < 1 / (1 + np.exp(theta[b] - theta[a])) else b
            comps.append((int(win), int(b if win == a else a)))
            j_rows.append((f"q{q}", r, cands[a], cands[b], cands[win], None))
        grades = rescale(fit(10, comps))
        q_rows.append({"id": f"q{q}", "problem": f"query {q}", "solution": "s",
                       "candidates": cands, "relevance_scores": grades.tolist(), "domains": ["A"]})  # fmt: skip
        for name, noise in (("close", 0.3), ("noisy", 3.0)):
            for setting in ("statement-full", "statement-only"):
                run_rows.append((name, f"q{q}", setting, ["A"], False,
                                 (theta + noise * rng.standard_normal(10)).tolist()))  # fmt: skip
    bench = Benchmark(
        pl.DataFrame(q_rows), docs,
        {"ratings": {"prior": "l2", "c": 1.0, "alpha": 0.1, "soft": False}},
        judgments=pl.DataFrame(j_rows, schema=JUDGMENT_SCHEMA, orient="row") if with_judgments else None,
    )  # fmt: skip
    bench.write(tmp_path / "bench")
    runs = pl.DataFrame(
        run_rows, orient="row",
        schema={"retriever": pl.String, "query_id": pl.String, "setting": pl.String,
                "domains": pl.List(pl.String), "failed": pl.Boolean, "scores": pl.List(pl.Float64)},
    )  # fmt: skip
    return Benchmark.read(tmp_path / "bench"), runs


def test_joint_board_beside_the_query_only_one(tmp_path):
    bench, runs = small_bench(tmp_path)
    posteriors, why = joint.benchmark_posteriors(bench)
    assert why is None and len(posteriors) == 12
    rel = bench.relevance()
    ranked = joint.rankings(runs, {q: len(g) for q, g in rel.items()})
    jb = joint.joint_board(ranked, posteriors, rel, resamples=300, seed=5)
    assert jb.rows.height == 4 and jb.tests.height == 2
    ndcg = runs.with_columns(
        ndcg=pl.struct("query_id", "scores").map_elements(
            lambda r: ndcg_at_k(r["scores"], rel[r["query_id"]]), return_dtype=pl.Float64
        )
    )
    for (setting, name), part in ndcg.sort("query_id").group_by(["setting", "retriever"]):
        row = jb.rows.filter((pl.col("setting") == setting) & (pl.col("retriever") == name))
        means = bootstrap_means(part["ndcg"].to_numpy(), 300, 5)
        q_lo, q_hi = np.quantile(means, [0.025, 0.975])
        lo, hi = row["ci_low_joint"][0], row["ci_high_joint"][0]
        assert abs((lo + hi) / 2 - part["ndcg"].mean()) < hi - lo  # about the score, corrected
        assert hi - lo > q_hi - q_lo  # the judges' noise widens it
        assert 0 < row["judge_noise_share"][0] < 1
    tables = [
        pl.DataFrame(
            {
                "retriever": [n] * 2,
                "kind": ["x"] * 2,
                "setting": ["statement-full", "statement-only"],
                "ndcg@10": [0.5, 0.4],
            }
        )  # fmt: skip
        for n in ("close", "noisy")
    ]
    board, tests = assemble_board(
        tables, ndcg.select("retriever", "query_id", "setting", "domains", "ndcg"), ["A"],
        "ndcg@10", "cpu", resamples=300, test_resamples=500, seed=5, alpha=0.05, joint=jb,
    )  # fmt: skip
    for col in ("ci_low_joint", "ci_high_joint", "rank_ci_joint", "tie_group_joint"):
        assert board[col].null_count() == 0, col
    sep = separable_pairs(tests)
    assert sep.columns == ["setting", "pairs", "separable_query_only", "separable_joint",
                           "separable_joint_low", "separable_joint_high"]  # fmt: skip
    assert (sep["separable_joint"] <= sep["pairs"]).all()
    assert (sep["separable_joint_low"] <= sep["separable_joint"]).all()
    assert (sep["separable_joint"] <= sep["separable_joint_high"]).all()


def test_no_joint_intervals_without_judgments_or_with_edited_grades(tmp_path):
    bench, _ = small_bench(tmp_path, with_judgments=False)
    assert joint.benchmark_posteriors(bench) == (
        {},
        "the benchmark carries no judgments (judgments.parquet)",
    )
    bench, _ = small_bench(tmp_path / "b", seed=1)
    edited = bench.queries.with_columns(pl.col("relevance_scores").list.eval(pl.element() * 0.9))
    posteriors, why = joint.benchmark_posteriors(Benchmark(edited, bench.documents, bench.manifest, judgments=bench.judgments))  # fmt: skip
    assert posteriors == {} and "not the Bradley–Terry fit" in why


def test_judgments_naming_a_stranger_are_refused(tmp_path):
    bench, _ = small_bench(tmp_path)
    outsider = next(d for d in range(40) if d not in bench.queries["candidates"][0])
    bad = bench.judgments.with_columns(
        pl.when(pl.int_range(pl.len()) == 3).then(outsider).otherwise(pl.col("winner")).alias("winner")
    )  # fmt: skip
    with pytest.raises(BenchmarkFormatError, match="judgments.parquet row 3"):
        Benchmark(bench.queries, bench.documents, bench.manifest, judgments=bad).validate()


def test_the_built_board_carries_the_judges_noise(shared_build, tmp_path, monkeypatch, capsys):
    """The tiny build: its benchmark holds its judgments, its board the joint columns beside
    the query-only ones, leaderboard.md says what they are, the rounds curve is written and
    `saber cost --plan` prints it beside the GPU-hours of a round."""
    from saber_assets.cli import main

    built = shared_build("tiny")
    home = built.home / "tiny"
    bench = Benchmark.read(home / "evaluation_benchmark")
    assert bench.judgments is not None and bench.judgments.height > 0
    assert joint.benchmark_posteriors(bench)[1] is None
    board = pl.read_parquet(home / "leaderboard" / "leaderboard.parquet")
    for col in ("ci_low_joint", "ci_high_joint", "rank_ci_joint", "judge_noise_share"):
        assert board[col].null_count() == 0, col
    assert (board["ci_low_joint"] <= board["ci_high_joint"]).all()
    text = (home / "leaderboard" / "leaderboard.md").read_text()
    assert "**Judge noise.**" in text and "over the queries and the judgments" in text
    assert "ci_low_joint" in text and "rank_ci_joint" in text
    curve = pl.read_parquet(home / "leaderboard" / "rounds_resolution.parquet")
    rounds = int(bench.judgments["round"].max())
    assert sorted(set(curve["rounds"])) == list(range(1, rounds + 1))
    assert set(curve["setting"]) == set(board["setting"])
    cfg = built.copy_to(tmp_path / "copy", monkeypatch)
    capsys.readouterr()
    assert main(["cost", "--config", str(cfg), "--plan"]) == 0
    out = capsys.readouterr().out
    assert "one more Swiss round costs" in out and "projected" in out and "measured" in out


def test_the_judge_share_is_shown_to_the_precision_its_draws_support():
    """Its Monte-Carlo standard error shrinks with the draws (about as 1/√draws), and the text
    keeps no digit finer than two of them."""
    from saber_assets.leaderboard.joint import share_standard_error, share_text

    rng = np.random.default_rng(2)

    def draws(n: int):
        query_only = 0.6 + 0.02 * rng.standard_normal((n, 3))
        joint = query_only + 0.015 * rng.standard_normal((n, 3))
        return query_only, joint

    few, many = share_standard_error(*draws(500), 0), share_standard_error(*draws(8000), 0)
    assert (few > 2.5 * many).all() and (many > 0).all()
    assert share_text(0.2134, 0.021) == "0.21 ± 0.04"
    assert share_text(0.2134, 0.3) == "0.2 ± 0.6"
    assert share_text(0.2134, 0.0004) == "0.2134 ± 0.0008"
    assert share_text(0.2134, None) == "0.2"


def test_a_joint_decision_within_its_draws_error_widens_the_separable_count():
    """The joint separable counts moved across draw sets (12 / 8 / 27 ranged 11–12 / 7 / 21–28):
    a joint test whose z lies within two of its own Monte-Carlo errors of Holm's critical z is
    marked, and the count is given with the range those pairs span."""
    import polars as pl
    from scipy.stats import norm

    from saber_assets.leaderboard.assemble import separable_pairs
    from saber_assets.leaderboard.board_markdown import joint_paragraph
    from saber_assets.leaderboard.joint import near_joint_threshold

    p = np.array([1e-9, 0.02, 0.9])
    critical = norm.isf(0.05 / np.array([3, 2, 1]) / 2)  # Holm's, by rank
    z = np.array([6.1, critical[1] + 0.01, 0.1])
    near = near_joint_threshold(z, np.full(3, 0.05), p, 0.05)
    assert near.tolist() == [False, True, False]
    tests = pl.DataFrame({"setting": "s", "domain": "Overall", "a": ["x", "x", "y"],
                          "b": ["y", "z", "z"], "better": ["x", None, None],
                          "p_joint": p, "better_joint": ["x", "x", None],
                          "near_threshold_joint": near})  # fmt: skip
    counts = separable_pairs(tests).row(0, named=True)
    assert (counts["separable_joint"], counts["separable_joint_low"],
            counts["separable_joint_high"]) == (2, 1, 2)  # fmt: skip
    text = joint_paragraph(separable_pairs(tests), None)
    assert "2 over the queries and the judgments (1–2 within the draws' own error" in text
