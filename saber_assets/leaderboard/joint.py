"""Leaderboard intervals over both the queries and the judgments that graded them.

A grade is a Bradley–Terry strength fitted to a few dozen noisy judgments, min–max rescaled to
[0, 5]. The query-only bootstrap treats it as known; the joint bootstrap does not. Each draw

1. resamples the queries with replacement — the very resamples the query-only bootstrap draws
   (``metrics.bootstrap_means``: the same seed, the same index matrix), so the two intervals
   differ by the judge noise alone;
2. draws every query's strengths from the fit's posterior, in its Laplace form: a Gaussian at
   the fitted strengths with the inverse of the log-posterior's negative Hessian as covariance
   (``bradley_terry.information``), rescales them to [0, 5] like the ratings, and so regrades
   the query;
3. scores every system on the same regraded queries: DCG@k is linear in the gains for a fixed
   ranking (``metrics.dcg_weights``), so one matrix product scores all systems and all draws.

Why posterior draws rather than resampling each query's judgments and refitting: a Swiss
tournament chooses its pairs from the standings, so a resample of its judgments is a design the
tournament would never have played (a candidate's games dropped, another's doubled); the L2
prior makes the fit a posterior mode, whose Laplace approximation is the fit's own statement of
its uncertainty; and it costs one Cholesky factor per query instead of a Newton refit per query
and draw (10⁶ fits at the full config). The draws' grades average out the fit's shrinkage and
rescaling nonlinearity the plug-in grades carry, which is what makes the joint intervals cover
the true differences when the judge is noisy (``tests/test_joint_intervals.py`` simulates it).

The intervals are basic (reflected) bootstrap intervals, [2t − t*₉₇.₅, 2t − t*₂.₅]
(Davison & Hinkley 1997, §5.2), not percentile ones: a noisy judge does not only spread a
system's nDCG, it biases it (a misgraded top candidate costs the good systems most, so the
differences between systems shrink), and the draws, regraded once more at the same
signal-to-noise ratio (min–max makes the strengths' scale irrelevant), shrink again by about as
much. Reflecting the draws about the point estimate undoes that shrinkage to first order; a
percentile interval sits on the shrunk side and misses the true differences (measured in
``joint_coverage``: 53% against 98% on a noisy judge). Ranks, tests and widths all read the
reflected draws.

Per pair of systems the joint test is a z-test of the bias-corrected difference with the draws'
standard error (two-sided, Holm-corrected over the setting's pairs, like the query-only test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import polars as pl
from scipy.linalg import solve_triangular

from saber_assets.benchmark.data import Benchmark
from saber_assets.leaderboard.board import CI_HIGH_JOINT, CI_LOW_JOINT
from saber_assets.leaderboard.significance import better_of, holm, rank_bounds
from saber_assets.ratings.bradley_terry import (
    DEFAULT_PRIOR,
    Pair,
    Prior,
    fit_many,
    information,
    rescale,
)
from saber_assets.ratings.rate import pair_outcomes
from saber_assets.runs.metrics import dcg_weights, gains, ideal_dcg, resampled_rows

LEVEL = 0.95


@dataclass(frozen=True)
class GradePosterior:
    """One query's strengths: the fitted ones and the upper Cholesky factor U of the negative
    Hessian there (UᵀU = H), so θ = θ̂ + U⁻¹z, z ~ N(0, I), has covariance H⁻¹."""

    theta: np.ndarray
    factor: np.ndarray

    def draw(self, rng: np.random.Generator, draws: int) -> np.ndarray:
        """``draws`` strength vectors as columns (n × draws)."""
        z = rng.standard_normal((len(self.theta), draws))
        return self.theta[:, None] + solve_triangular(self.factor, z, lower=False)


def grade_posteriors(
    problems: Sequence[tuple], prior: Prior = DEFAULT_PRIOR
) -> list[GradePosterior]:
    """Each query's posterior from (candidates, (winner, loser) pairs[, tied pairs]), fitted as
    the ratings are (``fit_many``)."""
    ties = [p[2] if len(p) > 2 else () for p in problems]
    thetas = fit_many([(p[0], p[1]) for p in problems], prior, ties=ties) if problems else []
    out = []
    for (n, comps, *_), tied, theta in zip(problems, ties, thetas, strict=True):
        h = information(n, comps, theta, prior, tied)
        out.append(GradePosterior(theta, np.linalg.cholesky(h).T))
    return out


@dataclass(frozen=True)
class JointDraws:
    """The bootstrap's means: ``joint`` with the grades drawn, ``query_only`` with the fitted
    grades, both on the same query resamples (draws × systems)."""

    joint: np.ndarray
    query_only: np.ndarray
    point: np.ndarray  # the systems' means on the fitted grades (no resampling)


def joint_draws(
    posteriors: Sequence[GradePosterior],
    weights: Sequence[np.ndarray],
    fitted: Sequence[np.ndarray],
    resamples: int = 1000,
    seed: int = 0,
    gain: str = "exponential",
    k: int = 10,
) -> JointDraws:
    """Per query q: ``weights[q]`` (systems × candidates) each system's DCG weights
    (``metrics.dcg_weights``; a row of zeros for a failed query, which scores 0), ``fitted[q]``
    the query's grades as published. Queries resampled as ``metrics.bootstrap_means`` does."""
    n_q = len(posteriors)
    n_s = weights[0].shape[0] if n_q else 0
    idx = resampled_rows(n_q, resamples, seed)  # the query-only bootstrap's very draws
    counts = np.zeros((resamples, n_q))
    np.add.at(counts, (np.repeat(np.arange(resamples), n_q), idx.ravel()), 1.0)
    joint = np.zeros((resamples, n_s))
    query_only = np.zeros((resamples, n_s))
    point = np.zeros(n_s)
    grade_rng = np.random.default_rng([seed, 1])
    for q, (post, w, rel) in enumerate(zip(posteriors, weights, fitted, strict=True)):
        g = gains(rescale(post.draw(grade_rng, resamples)), gain)
        ideal = ideal_dcg(g, k)
        ndcg = np.divide(w @ g, ideal, out=np.zeros((n_s, resamples)), where=ideal > 0)
        joint += ndcg.T * counts[:, q : q + 1]
        g0 = gains(np.asarray(rel, dtype=np.float64), gain)
        i0 = float(ideal_dcg(g0, k))
        nd0 = (w @ g0) / i0 if i0 > 0 else np.zeros(n_s)
        query_only += counts[:, q : q + 1] * nd0[None, :]
        point += nd0
    scale = max(n_q, 1)
    return JointDraws(joint / scale, query_only / scale, point / scale)


def grade_intervals(
    posterior: GradePosterior, rng: np.random.Generator, draws: int = 400, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate's posterior interval on the grade scale [0, 5]: how unsure the judge's
    games leave its grade (the draws rescaled as the joint bootstrap rescales them)."""
    grades = rescale(posterior.draw(rng, draws))
    lo, hi = np.quantile(grades, [(1 - level) / 2, 1 - (1 - level) / 2], axis=1)
    return lo, hi


def reflected(draws: np.ndarray, point: np.ndarray) -> np.ndarray:
    """The draws mirrored about the point estimate (2t − t*): the basic bootstrap's draws, cut
    at nDCG's range [0, 1] (a mirrored draw can pass it; a mean of nDCG cannot)."""
    return np.clip(2.0 * point[None, :] - draws, 0.0, 1.0)


def intervals(means: np.ndarray, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval of each column (of already reflected draws)."""
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2], axis=0)
    return lo, hi


def paired_draw_tests(
    draws: np.ndarray, names: Sequence[str], point: np.ndarray, alpha: float = 0.05
) -> pl.DataFrame:
    """Every pair (first − second): a two-sided z-test of the difference with the joint draws'
    standard error, centred where the basic bootstrap centres it (2t − mean t*), Holm-corrected
    over the pairs; and which system the joint test orders first. ``draws``: the joint draws
    as drawn (not reflected). A share of draws past 0 cannot go below 1/(draws + 1), which
    Holm over a board's pairs (66 for 12 systems) would never let through at 1,000 draws; the
    mean difference over hundreds of queries is close to normal, so its standard error says
    more than the count."""
    from scipy.stats import norm

    rows = []
    for i, j in combinations(range(len(names)), 2):
        d = draws[:, i] - draws[:, j]
        observed = float(point[i] - point[j])
        centre, se = 2 * observed - float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else 0.0
        p = 1.0 if centre == 0 else 0.0 if se == 0 else float(2 * norm.sf(abs(centre) / se))
        z = abs(centre) / se if se > 0 else 0.0
        # the z-statistic's own Monte-Carlo error from the draws: the centre's mean over them
        # and their standard deviation (delta method), in units of z
        z_error = float(np.sqrt((1 + z * z / 2) / max(len(d), 1)))
        rows.append((names[i], names[j], observed, centre, p, z, z_error))
    frame = pl.DataFrame(
        rows, orient="row",
        schema={"a": pl.String, "b": pl.String, "mean_diff": pl.Float64,
                "mean_diff_joint": pl.Float64, "p_joint": pl.Float64, "_z": pl.Float64,
                "_z_error": pl.Float64},
    )  # fmt: skip
    frame = frame.with_columns(
        pl.Series("p_joint_holm", holm(frame["p_joint"].to_list())),
        pl.Series("near_threshold_joint", near_joint_threshold(
            frame["_z"].to_numpy(), frame["_z_error"].to_numpy(), frame["p_joint"].to_numpy(),
            alpha), dtype=pl.Boolean),
    ).drop("_z", "_z_error")  # fmt: skip
    return frame.with_columns(
        better_of("p_joint_holm", "mean_diff_joint", alpha).alias("better_joint")
    )


def near_joint_threshold(
    z: np.ndarray, z_error: np.ndarray, p: np.ndarray, alpha: float, within: float = 2.0
) -> np.ndarray:
    """Which joint tests lie within ``within`` of their z's own Monte-Carlo errors of the z
    that Holm's threshold for their rank asks (α / (m − rank)): another draw set could turn
    their decision, so the separable count is given with the range they span."""
    from scipy.stats import norm

    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p, kind="stable")
    critical = np.empty(m)
    critical[order] = norm.isf(alpha / (m - np.arange(m)) / 2)
    return np.abs(z - critical) < within * z_error


def judge_noise_share(query_width: np.ndarray, joint_width: np.ndarray) -> np.ndarray:
    """The share of the joint interval's variance the judge noise adds, 1 − (w_query / w_joint)²
    (0 when the joint interval is no wider)."""
    ratio = np.divide(
        query_width, joint_width, out=np.ones_like(joint_width), where=joint_width > 0
    )
    return np.clip(1.0 - ratio**2, 0.0, 1.0)


SHARE_REDRAWS = 200  # redraws of the draws that measure the judge share's own precision


def share_standard_error(query_only: np.ndarray, joint: np.ndarray, seed: int) -> np.ndarray:
    """The Monte-Carlo standard error of each system's ``judge_noise_share``: the share made
    again from ``SHARE_REDRAWS`` resamples of the draws (rows of both, paired: they share their
    query sets). At 1,000 draws it is ~0.03–0.05: a share is shown to that precision, no finer."""
    n = len(joint)
    if n < 2:
        return np.full(joint.shape[1], np.nan)
    rows = np.random.default_rng([seed, 17]).integers(0, n, size=(SHARE_REDRAWS, n))
    shares = np.empty((SHARE_REDRAWS, joint.shape[1]))
    for r, idx in enumerate(rows):
        q_lo, q_hi = intervals(query_only[idx])
        lo, hi = intervals(joint[idx])
        shares[r] = judge_noise_share(q_hi - q_lo, hi - lo)
    return shares.std(axis=0, ddof=1)


def share_text(share: float | None, se: float | None) -> str:
    """A judge share to the precision its draws support: ``0.21 ± 0.04`` (two standard errors
    at one significant digit, the share to that digit's place), ``0.2`` without a standard
    error."""
    if share is None or share != share:
        return ""
    if se is None or se != se or se <= 0:
        return f"{share:.1f}"
    half = 2 * se
    digits = max(0, -int(np.floor(np.log10(half))))
    return f"{share:.{digits}f} ± {half:.{digits}f}"


def share_texts(board: pl.DataFrame) -> pl.Series:
    """Each row's judge share as ``share_text`` words it (null where the row has none)."""
    se = (
        board["judge_noise_share_se"]
        if "judge_noise_share_se" in board.columns
        else pl.Series([None] * board.height, dtype=pl.Float64)
    )
    return pl.Series(
        "judge share",
        [share_text(s, e) or None for s, e in zip(board["judge_noise_share"], se, strict=True)],
        dtype=pl.String,
    )


@dataclass(frozen=True)
class JointBoard:
    """Per (setting, retriever): the joint interval, rank interval and the judge's share of the
    width (``rows``); per pair of a setting: the joint test (``tests``)."""

    rows: pl.DataFrame
    tests: pl.DataFrame


@dataclass(frozen=True)
class Rankings:
    """How every system ranks each query's candidates, as DCG@k weights (``systems`` ×
    candidates per query id; a zero row where a system failed or has no run): fixed by the
    runs, whatever grades are drawn, so the resolution curve's refits reuse them."""

    systems: list[tuple[str, str]]  # (setting, retriever), the weight rows' order
    weights: dict[str, np.ndarray]
    k: int


def rankings(
    runs: pl.DataFrame, sizes: dict[str, int], k: int = 10, ties: str = "average"
) -> Rankings:
    """The runs' (retriever, query_id, setting, failed, scores) rankings of the queries in
    ``sizes`` (query id -> its candidates)."""
    frame = runs.unique(["retriever", "setting", "query_id"], keep="first")
    systems = frame.select("setting", "retriever").unique().sort("setting", "retriever").rows()
    column = {key: c for c, key in enumerate(systems)}
    weights = {}
    for (qid,), part in frame.partition_by("query_id", as_dict=True).items():
        if qid not in sizes:
            continue
        w = np.zeros((len(systems), sizes[qid]))
        for setting, name, failed, scores in part.select(
            "setting", "retriever", "failed", "scores"
        ).iter_rows():
            if not failed and scores is not None:
                w[column[(setting, name)]] = dcg_weights(scores, k, ties)
        weights[qid] = w
    return Rankings(systems, weights, k)


def joint_board(
    ranked: Rankings,
    posteriors: dict[str, GradePosterior],
    relevance: dict[str, Sequence[float]],
    *,
    gain: str = "exponential",
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> JointBoard:
    """The joint columns of a leaderboard, over the queries that are ranked and have a
    posterior, in query-id order (the order ``evaluate.score_table`` bootstraps, so the query
    resamples are the board's). A system with no score for a query (failed, or no run) scores
    it 0, as on the board."""
    systems, k = ranked.systems, ranked.k
    qids = sorted(set(ranked.weights) & set(posteriors))
    weights = [ranked.weights[q] for q in qids]
    draws = joint_draws(
        [posteriors[q] for q in qids], weights, [relevance[q] for q in qids], resamples, seed,
        gain, k,
    )  # fmt: skip
    mirrored = reflected(draws.joint, draws.point)
    rows, tests = [], []
    for setting in sorted({s for s, _ in systems}):
        cols = [c for c, (s, _) in enumerate(systems) if s == setting]
        names = [name for s, name in systems if s == setting]
        m, point = mirrored[:, cols], draws.point[cols]
        lo, hi = intervals(m)
        q_lo, q_hi = intervals(draws.query_only[:, cols])
        share = judge_noise_share(q_hi - q_lo, hi - lo)
        rows.append(pl.DataFrame({
            "setting": setting, "retriever": names,
            # the score the reflected interval is centred on: 2t − mean t*, the point estimate
            # with the judge's pull on it undone (the interval can sit above the raw score)
            "ndcg_corrected": np.clip(2.0 * point - draws.joint[:, cols].mean(axis=0), 0, 1),
            CI_LOW_JOINT: lo, CI_HIGH_JOINT: hi,
            "rank_ci_joint": rank_bounds(m)[2], "judge_noise_share": share,
            "judge_noise_share_se": share_standard_error(draws.query_only[:, cols], m, seed),
        }))  # fmt: skip
        if len(names) > 1:
            tests.append(
                paired_draw_tests(draws.joint[:, cols], names, point, alpha).with_columns(
                    setting=pl.lit(setting)
                )
            )
    empty = pl.DataFrame(schema={"setting": pl.String, "retriever": pl.String})
    return JointBoard(
        pl.concat(rows) if rows else empty,
        pl.concat(tests)
        if tests
        else pl.DataFrame(
            schema={"setting": pl.String, "a": pl.String, "b": pl.String, "better_joint": pl.String}
        ),  # fmt: skip
    )


def manifest_prior(manifest: dict) -> Prior:
    """The Bradley–Terry prior the benchmark's grades were fitted under (its manifest's
    ``ratings``; the default prior for a manifest that does not say)."""
    fit_cfg = manifest.get("ratings") or {}
    return Prior(fit_cfg.get("prior", "l2"), c=fit_cfg.get("c", 1.0), alpha=fit_cfg.get("alpha", 0.1))  # fmt: skip


def judged_queries(
    bench: Benchmark, max_round: int | None = None
) -> tuple[list[str], list[tuple[int, list[Pair]]], list[np.ndarray]]:
    """(query ids, (candidates, (winner, loser) positions), published grades) of the queries the
    benchmark's judgments decide, from the rounds up to ``max_round`` (all of them: None)."""
    both = bool((bench.manifest.get("ratings") or {}).get("both_orders"))
    judged = bench.judgments
    if max_round is not None:
        judged = judged.filter(pl.col("round") <= max_round)
    by_query = {k[0]: f for k, f in judged.partition_by("query_id", as_dict=True).items()}
    qids, problems, published = [], [], []
    for qid, cands, grades in bench.queries.select("id", "candidates", "relevance_scores").iter_rows():  # fmt: skip
        if qid not in by_query:
            continue
        wins, ties = pair_outcomes(by_query[qid], cands, both, "shown_first", "shown_second")
        qids.append(qid)
        problems.append((len(cands), wins, ties))
        published.append(np.asarray(grades, dtype=np.float64))
    return qids, problems, published


def benchmark_posteriors(bench: Benchmark) -> tuple[dict[str, GradePosterior], str | None]:
    """Each query's grade posterior from the benchmark's own judgments (``judgments.parquet``)
    under the manifest's prior, or none and why: no judgments, soft grades, or grades that are
    not the judgments' fit (a benchmark edited after its tournament)."""
    if bench.judgments is None or bench.judgments.height == 0:
        return {}, "the benchmark carries no judgments (judgments.parquet)"
    if (bench.manifest.get("ratings") or {}).get("soft"):
        return {}, "its grades come from the judge's probabilities (tournament.policy efficient)"
    qids, problems, published = judged_queries(bench)
    posteriors = grade_posteriors(problems, manifest_prior(bench.manifest))
    gap = max(
        (float(np.abs(rescale(p.theta) - g).max()) for p, g in zip(posteriors, published, strict=True)),
        default=0.0,
    )  # fmt: skip
    if gap > 1e-6:
        return {}, (
            f"its grades are not the Bradley–Terry fit of its judgments (they differ by up to "
            f"{gap:.3g}): the judgments cannot say how noisy these grades are"
        )
    return dict(zip(qids, posteriors, strict=True)), None


def rounds_grid(rounds: int) -> list[int]:
    """The round counts the resolution curve refits at: every one up to 10, then about ten
    steps, always ending at the tournament's own."""
    if rounds <= 10:
        return list(range(1, rounds + 1))
    return sorted({*range(1, 6), *np.linspace(5, rounds, 7).round().astype(int).tolist()})


def rounds_resolution(
    bench: Benchmark,
    ranked: Rankings,
    *,
    resamples: int = 200,
    seed: int = 0,
    alpha: float = 0.05,
) -> pl.DataFrame:
    """What judging bought: per setting and round count r, the grades refitted on the first r
    Swiss rounds and the board's resolution under them — pairs the joint test separates, and
    the mean width of the joint intervals (``joint_board`` at ``resamples`` draws)."""
    rounds = int(bench.judgments["round"].max())
    prior = manifest_prior(bench.manifest)
    out = []
    for r in rounds_grid(rounds):
        qids, problems, _ = judged_queries(bench, r)
        posteriors = grade_posteriors(problems, prior)
        relevance = {q: rescale(p.theta) for q, p in zip(qids, posteriors, strict=True)}
        jb = joint_board(
            ranked, dict(zip(qids, posteriors, strict=True)), relevance, resamples=resamples,
            seed=seed, alpha=alpha,
        )  # fmt: skip
        widths = jb.rows.group_by("setting").agg(
            (pl.col(CI_HIGH_JOINT) - pl.col(CI_LOW_JOINT)).mean().alias("mean_width_joint")
        )
        separated = (
            jb.tests.group_by("setting").agg(
                pl.len().alias("pairs"), pl.col("better_joint").is_not_null().sum().alias("separable_joint")
            )
            if jb.tests.height
            else pl.DataFrame(schema={"setting": pl.String, "pairs": pl.UInt32, "separable_joint": pl.UInt32})
        )  # fmt: skip
        out.append(
            widths.join(separated, on="setting", how="left").with_columns(
                rounds=pl.lit(r, pl.Int64),
                judgments=pl.lit(sum(len(p[1]) + len(p[2]) for p in problems), pl.Int64),
            )  # fmt: skip
        )
    return (
        pl.concat(out, how="diagonal")
        .select("setting", "rounds", "judgments", "pairs", "separable_joint", "mean_width_joint")
        .sort("setting", "rounds")
    )


def joint_intervals(
    bench: Benchmark,
    runs: pl.DataFrame,
    *,
    k: int,
    ties: str,
    resamples: int,
    curve_draws: int,
    seed: int,
    alpha: float,
) -> tuple[JointBoard | None, pl.DataFrame | None, str | None]:
    """(joint board, rounds-vs-resolution curve, why there are none) of the benchmark's runs
    (retriever, query_id, setting, failed, scores): nothing, and the reason, where its
    judgments cannot regrade it (``benchmark_posteriors``); no curve with ``curve_draws`` 0."""
    posteriors, why = benchmark_posteriors(bench)
    if not posteriors:
        return None, None, why
    relevance = bench.relevance()
    ranked = rankings(runs, {q: len(g) for q, g in relevance.items()}, k, ties)
    joint = joint_board(ranked, posteriors, relevance, resamples=resamples, seed=seed, alpha=alpha)
    curve = (
        rounds_resolution(bench, ranked, resamples=curve_draws, seed=seed, alpha=alpha)
        if curve_draws
        else None
    )
    return joint, curve, None
