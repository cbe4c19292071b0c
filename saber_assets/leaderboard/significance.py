"""Whether the leader leads: paired tests between systems, rank intervals, and how stable the
ordering is under another gain, another rating scale and another set of queries.

Everything works on one matrix per setting: per-query nDCG@k, queries × systems, over the
queries every system of the setting scored (a failed query counts 0, as on the leaderboard).

- Paired tests: a paired t-test (``scipy.stats.ttest_rel``) and a seeded paired randomization
  test (the sign of each query's difference flipped at random, ``scipy.stats.permutation_test``'s
  definition, counted by ``randomization_p``; where no resample is as extreme, the sign-flip distribution's
  normal tail, since the Monte Carlo p cannot go below its floor), each Holm-corrected over all
  pairs of the setting. "A beats B"
  means A's mean is higher and the corrected randomization p-value is below ``alpha`` (the
  randomization test assumes no normality; the t-test is reported beside it).
- Rank intervals: one seeded bootstrap over the shared queries, the same resampled query sets
  for every system; each resample ranks the systems by their means, and a system's 95% interval
  is the 2.5th–97.5th percentile of its ranks.
- Orderings are compared by Kendall's τ (``scipy.stats.kendalltau``, τ-b) and the pairs that flip.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import polars as pl

from saber_assets.lib.correlation import kendall_tau_b
from saber_assets.runs.evaluate import rescore_runs, skipped
from saber_assets.runs.metrics import bootstrap_means

ALPHA = 0.05
MIN_DOMAIN_QUERIES = 30  # per-domain tests only where a domain has at least this many queries


def score_matrix(runs: pl.DataFrame, setting: str, column: str = "ndcg"):
    """(query ids, system names, matrix queries × systems) of one setting, over the queries that
    every system scored; a failed query is 0 (the leaderboard's convention), a skipped one is
    not scored (``evaluate.skipped``: the query leaves the matrix)."""
    frame = (
        runs.filter(pl.col("setting") == setting)
        .filter(~skipped(runs))
        .unique(["retriever", "query_id"], keep="first")
        .with_columns(pl.col(column).fill_null(0.0))
    )
    names = sorted(frame["retriever"].unique().to_list())
    if not names:
        return [], [], np.zeros((0, 0))
    wide = (
        frame.pivot(on="retriever", index="query_id", values=column).drop_nulls().sort("query_id")
    )
    return wide["query_id"].to_list(), names, wide.select(names).to_numpy().astype(np.float64)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down correction: the k-th smallest of m p-values times (m − k + 1), made
    monotone, capped at 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out


def paired_pvalues(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> tuple[float, float]:
    """(paired t-test p, paired randomization p), two-sided; identical systems give 1 and 1."""
    from scipy.stats import ttest_rel

    d = a - b
    if len(d) < 2 or np.all(d == 0):
        return 1.0, 1.0
    if np.ptp(d) <= 1e-12 * max(1.0, float(np.abs(d).max())):
        p_t = 0.0  # a constant difference (to rounding): no variance, an infinite t statistic
    else:
        p_t = float(ttest_rel(a, b).pvalue)
    return p_t, randomization_p(a, b, resamples, seed)


def randomization_p(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """The paired randomization test's two-sided p, ``resamples`` seeded sign flips of the
    queries' differences, under scipy's ``permutation_test`` definition: twice the smaller
    tail, each tail (hits + 1) / (flips + 1), a flip's sum within 100 ulps of the observed one
    counted as equal to it, capped at 1. Counted here, not by scipy: flips as an int8 matrix
    times the differences cost 6 ms for 10,000 flips of 100 queries where ``permutation_test``
    takes 76 ms, and 0.35 s for 1,000,000 where it takes 4.9 s (the board draws up to that many
    for a pair near its Holm threshold). ``saber verify`` recomputes it with scipy's."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if len(d) < 2 or np.all(d == 0):
        return 1.0
    rng = np.random.default_rng([seed, len(d), 7])
    observed = float(d.sum())
    gamma = abs(observed) * np.finfo(np.float64).eps * 100
    low = high = done = 0
    batch = max(1, 4_000_000 // len(d))  # flips per matrix: ~4 MB of signs
    while done < resamples:
        n = min(batch, resamples - done)
        sums = (rng.integers(0, 2, size=(n, len(d)), dtype=np.int8) * 2 - 1) @ d
        low += int(np.count_nonzero(sums <= observed + gamma))
        high += int(np.count_nonzero(sums >= observed - gamma))
        done += n
    p_r = min(1.0, 2 * min(low + 1, high + 1) / (resamples + 1))
    if min(low, high) == 0:
        # no flip as extreme: the Monte Carlo p sits at its floor (~2/(resamples + 1)), which
        # Holm over a board's pairs never lets through (780 pairs at 40 systems). The same
        # sign-flip distribution's normal tail (mean 0, variance Σd²) resolves it.
        from scipy.stats import norm

        z = abs(observed) / float(np.sqrt(np.sum(d * d)))
        p_r = min(p_r, float(2 * norm.sf(z)))
    return p_r


# the most sign flips a pair is given: a decision still this close to its Holm threshold is
# reported as such (``near_threshold``), not decided by more draws
MAX_TEST_RESAMPLES = 1_000_000


def near_holm_threshold(p: np.ndarray, resamples: np.ndarray, alpha: float,
                        z: float = 3.0) -> np.ndarray:  # fmt: skip
    """Which p-values lie within ``z`` Monte-Carlo standard errors of the threshold Holm holds
    them to (α / (m − rank)): their decision could turn on another seed."""
    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p, kind="stable")
    threshold = np.empty(m)
    threshold[order] = alpha / (m - np.arange(m))
    # a two-sided p is twice a tail's share q: its standard error is 2·√(q(1 − q)/resamples),
    # taken at the larger of p and the threshold. At p alone, a low estimate (6 flips as extreme
    # in 10,000) claims a small error and a decision the truth does not support: the sample's
    # p of 0.0006 was 0.0023 at 2,000,000 flips, over its threshold of 0.0018.
    q = np.clip(np.maximum(np.maximum(p, threshold) / 2, 1.0 / resamples), 0.0, 0.5)
    se = 2 * np.sqrt(q * (1 - q) / resamples)
    # below the Monte-Carlo floor, p is the sign-flip distribution's normal tail (no flip was as
    # extreme): decided by it where it lies an order of magnitude under the threshold (at 40
    # systems 600 of 780 pairs were otherwise drawn again for nothing)
    asymptotic = p < 2.0 / (resamples + 1)
    return np.where(asymptotic, p > threshold / 10, np.abs(p - threshold) < z * se)


def paired_tests(
    matrix: np.ndarray, names: Sequence[str], resamples: int = 10_000, seed: int = 0,
    alpha: float = ALPHA, max_resamples: int = MAX_TEST_RESAMPLES,
) -> pl.DataFrame:  # fmt: skip
    """Every pair of systems: mean difference (first − second), raw and Holm-corrected p-values
    of both tests, and which one (if any) is significantly better.

    The randomization test starts at ``resamples`` flips per pair; a pair whose p lies within
    three Monte-Carlo standard errors of its Holm threshold is drawn again with ten times as
    many, up to ``max_resamples``, so that a decision does not turn on the seed (the
    family grows the thresholds down: 66 pairs at 12 systems, 780 at 40). A p under the
    Monte-Carlo floor (the normal tail, no flip as extreme) an order of magnitude below its
    threshold is decided by that asymptotic p, without more flips.
    ``randomization_resamples`` says how many flips each pair's p took; ``near_threshold``
    marks a pair still undecidable at the cap."""
    pairs = list(combinations(range(len(names)), 2))
    p_t, p_r = [], []
    for i, j in pairs:
        t, r = paired_pvalues(matrix[:, i], matrix[:, j], resamples, seed)
        p_t.append(t)
        p_r.append(r)
    p_r = np.asarray(p_r, dtype=np.float64)
    used = np.full(len(pairs), resamples, dtype=np.int64)
    while True:
        redo = np.flatnonzero(near_holm_threshold(p_r, used, alpha) & (used < max_resamples))
        if redo.size == 0:
            break
        for k in redo:
            used[k] = min(used[k] * 10, max_resamples)
            i, j = pairs[k]
            p_r[k] = randomization_p(matrix[:, i], matrix[:, j], int(used[k]), seed)
    rows = [
        (names[i], names[j],
         float(np.mean(matrix[:, i] - matrix[:, j])) if len(matrix) else 0.0, p_t[n], p_r[n])
        for n, (i, j) in enumerate(pairs)
    ]  # fmt: skip
    frame = pl.DataFrame(
        rows, orient="row",
        schema={"a": pl.String, "b": pl.String, "mean_diff": pl.Float64, "p_ttest": pl.Float64,
                "p_randomization": pl.Float64},
    )  # fmt: skip
    frame = frame.with_columns(
        pl.Series("p_ttest_holm", holm(frame["p_ttest"].to_list())),
        pl.Series("p_randomization_holm", holm(frame["p_randomization"].to_list())),
        pl.Series("randomization_resamples", used, dtype=pl.Int64),
        pl.Series("near_threshold", near_holm_threshold(p_r, used, alpha), dtype=pl.Boolean),
    )
    return frame.with_columns(
        better_of("p_randomization_holm", "mean_diff", alpha).alias("better"),
        pl.lit(len(matrix)).alias("queries"),
    )


def better_of(p: str, diff: str, alpha: float) -> pl.Expr:
    """Which system of a pair (``a``, ``b``) a test orders first: the one its difference
    favours where the corrected p-value ``p`` is below ``alpha``, else null."""
    significant = pl.col(p) < alpha
    return (
        pl.when(significant & (pl.col(diff) > 0)).then(pl.col("a"))
        .when(significant & (pl.col(diff) < 0)).then(pl.col("b"))
        .otherwise(None)
    )  # fmt: skip


def beats(tests: pl.DataFrame) -> dict[str, list[str]]:
    """System -> the systems it is significantly better than."""
    out: dict[str, list[str]] = {}
    for a, b, better in tests.select("a", "b", "better").iter_rows():
        if better is not None:
            loser = b if better == a else a
            out.setdefault(better, []).append(loser)
    return {k: sorted(v) for k, v in out.items()}


def pvalue_matrix(tests: pl.DataFrame, names: Sequence[str], column: str) -> np.ndarray:
    """The symmetric matrix of one p-value column (1 on the diagonal)."""
    index = {n: k for k, n in enumerate(names)}
    m = np.ones((len(names), len(names)))
    for a, b, p in tests.select("a", "b", column).iter_rows():
        m[index[a], index[b]] = m[index[b], index[a]] = p
    return m


def rank_intervals(
    matrix: np.ndarray, names: Sequence[str], resamples: int = 1000, seed: int = 0,
    level: float = 0.95,
) -> pl.DataFrame:  # fmt: skip
    """Each system's rank (1 = best mean) and its bootstrap interval; the resamples are the same
    query sets for every system (``bootstrap_means`` over the matrix's rows)."""
    if matrix.size == 0:
        return pl.DataFrame(schema={"retriever": pl.String, "rank": pl.Int64,
                                    "rank_low": pl.Int64, "rank_high": pl.Int64,
                                    "rank_ci": pl.String})  # fmt: skip
    means = bootstrap_means(matrix, resamples, seed)  # resamples × systems
    lo, hi, labels = rank_bounds(means, level)
    point = rank_rows(matrix.mean(axis=0)[None, :])[0]
    return pl.DataFrame(
        {
            "retriever": list(names),
            "rank": point.astype(np.int64),
            "rank_low": lo,
            "rank_high": hi,
            "rank_ci": labels,
        }
    )


def rank_bounds(means: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each system's rank interval over resampled means (resamples × systems; 1 = best): the
    low and high ranks and their label (``3`` or ``2–4``)."""
    ranks = rank_rows(means)
    lo, hi = np.quantile(ranks, [(1 - level) / 2, 1 - (1 - level) / 2], axis=0, method="nearest")
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    return lo, hi, [f"{a}" if a == b else f"{a}–{b}" for a, b in zip(lo, hi, strict=True)]


def rank_rows(means: np.ndarray) -> np.ndarray:
    """Competition ranks of each row's values (1 = highest; tied values share the better rank)."""
    better = (means[:, None, :] > means[:, :, None]).sum(axis=2)  # how many beat each system
    return better + 1


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's τ-b between two scorings of the same systems (1 when both are constant, 0
    when only one is)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:
        return 1.0
    if np.all(x == x[0]) and np.all(y == y[0]):
        return 1.0
    tau = kendall_tau_b(x, y)
    return 0.0 if tau is None else tau


def flipped_pairs(names: Sequence[str], base: Sequence[float], other: Sequence[float]) -> list[str]:
    """The pairs whose order differs between two scorings ("A > B" in the base, reversed)."""
    out = []
    for i, j in combinations(range(len(names)), 2):
        d0, d1 = base[i] - base[j], other[i] - other[j]
        if d0 * d1 < 0:
            hi, lo = (names[i], names[j]) if d0 > 0 else (names[j], names[i])
            out.append(f"{hi} > {lo}")
    return out


def rescore(
    runs: pl.DataFrame, relevance: dict[str, list[float]], k: int, transform: str
) -> pl.DataFrame:
    """The stored runs' per-query nDCG@k under another gain or another rating scale, from their
    stored candidate scores (no retriever is run again): ``linear`` gain, ratings rescaled to
    ``[0,3]``, or ``ranks``: each query's ratings replaced by their within-query ranks
    rescaled to [0, 5] (ties share their mean rank), dropping the Bradley–Terry magnitudes."""
    from scipy.stats import rankdata

    def grades(rel: list[float]) -> np.ndarray:
        r = np.asarray(rel, dtype=np.float64)
        if transform == "scale3":
            return r * 3.0 / 5.0
        if transform == "ranks":
            ranks = rankdata(r)  # 1 = lowest
            return 5.0 * (ranks - 1) / max(len(r) - 1, 1)
        return r

    if transform not in ("linear", "scale3", "ranks"):
        raise ValueError(f"unknown transform {transform!r} (linear, scale3, ranks)")
    gain = "linear" if transform == "linear" else "exponential"
    return rescore_runs(runs, relevance, k, gain, grades=grades)


def half_split_taus(matrix: np.ndarray, splits: int = 200, seed: int = 0) -> np.ndarray:
    """τ between the system orderings of two disjoint random halves of the queries, per split:
    how much a benchmark of half the size would still agree with itself."""
    n = len(matrix)
    rng = np.random.default_rng(seed)
    out = np.empty(splits)
    for s in range(splits):
        perm = rng.permutation(n)
        a, b = perm[: n // 2], perm[n // 2 :]
        out[s] = kendall_tau(matrix[a].mean(axis=0), matrix[b].mean(axis=0))
    return out


def domain_runs(runs: pl.DataFrame, domain: str | None) -> pl.DataFrame:
    """The runs of the queries whose domain list holds ``domain`` (all of them for None)."""
    if domain is None:
        return runs
    return runs.filter(pl.col("domains").list.contains(domain))


def significance_tables(
    runs: pl.DataFrame,
    domains: Sequence[str],
    resamples: int = 1000,
    test_resamples: int = 10_000,
    seed: int = 0,
    alpha: float = ALPHA,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(paired tests per setting — Overall, and each domain with at least
    ``MIN_DOMAIN_QUERIES`` shared queries —, rank intervals per setting) over every retriever's
    runs (a ``retriever`` column)."""
    tests, ranks = [], []
    for setting in sorted(runs["setting"].unique().to_list()):
        for domain in [None, *domains]:
            qids, names, m = score_matrix(domain_runs(runs, domain), setting)
            if len(names) < 2 or (domain is not None and len(qids) < MIN_DOMAIN_QUERIES):
                continue
            t = paired_tests(m, names, test_resamples, seed, alpha)
            tests.append(
                t.with_columns(setting=pl.lit(setting), domain=pl.lit(domain or "Overall"))
            )
            if domain is None:
                r = rank_intervals(m, names, resamples, seed)
                ranks.append(r.with_columns(setting=pl.lit(setting)))
    empty_t = pl.DataFrame(schema={"setting": pl.String, "domain": pl.String, "a": pl.String,
                                   "b": pl.String, "better": pl.String})  # fmt: skip
    empty_r = pl.DataFrame(schema={"setting": pl.String, "retriever": pl.String,
                                   "rank_ci": pl.String})  # fmt: skip
    t = pl.concat(tests, how="diagonal") if tests else empty_t
    r = pl.concat(ranks, how="diagonal") if ranks else empty_r
    return t, r


def undecided_column(tests: pl.DataFrame) -> pl.DataFrame:
    """setting, retriever, undecided: the systems whose overall test with this one is still
    within reach of its Holm threshold at the flips' cap (``near_threshold``): another seed
    could turn that decision, so it is shown as undecided, not as a tie or a win."""
    rows: dict[tuple[str, str], list[str]] = {}
    if tests.height and "near_threshold" in tests.columns:
        near = tests.filter((pl.col("domain") == "Overall") & pl.col("near_threshold"))
        for setting, a, b in near.select("setting", "a", "b").iter_rows():
            rows.setdefault((setting, a), []).append(b)
            rows.setdefault((setting, b), []).append(a)
    return pl.DataFrame(
        [(s, r, ", ".join(sorted(w))) for (s, r), w in sorted(rows.items())], orient="row",
        schema={"setting": pl.String, "retriever": pl.String, "undecided": pl.String},
    )  # fmt: skip


def beats_column(tests: pl.DataFrame) -> pl.DataFrame:
    """setting, retriever, beats (comma-separated names, Overall tests only)."""
    rows = []
    overall = tests.filter(pl.col("domain") == "Overall") if tests.height else tests
    for (setting,), part in overall.group_by("setting", maintain_order=True):
        for name, losers in beats(part).items():
            rows.append((setting, name, ", ".join(losers)))
    return pl.DataFrame(rows, orient="row", schema={"setting": pl.String, "retriever": pl.String,
                                                    "beats": pl.String})  # fmt: skip
