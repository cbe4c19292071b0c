"""How fast does a tournament converge? Against the ranking of an exhaustive round-robin (every
pair judged once), the inversions of each policy's ranking after each Swiss-round's worth of
calls. The exhaustive judgments are the oracle: every policy (Swiss, random, adaptive,
efficient) runs through the engine's own pairing and estimation (`tournament.simulate`) and its
judge looks the answer up, so all policies see the same judge at equal budgets."""

from __future__ import annotations

import zlib

import numpy as np
import polars as pl

from saber_assets.config import PipelineConfig
from saber_assets.lib import sections
from saber_assets.lib.figures import pyplot
from saber_assets.ratings.bradley_terry import DEFAULT_PRIOR, Prior, fit
from saber_assets.tournament.simulate import estimate

POLICIES = ("swiss", "random", "adaptive", "efficient")


def round_robin(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair once, each shown in a seeded random order: (first, second) index arrays."""
    i, j = np.triu_indices(n, 1)
    flip = np.random.default_rng(seed).random(len(i)) < 0.5
    return np.where(flip, j, i), np.where(flip, i, j)


def lookup_judge(n: int, first: np.ndarray, second: np.ndarray, p_first: np.ndarray):
    """A judge answering from the exhaustive judgments, whichever order a pair is shown in."""
    table = np.full((n, n), np.nan)
    table[first, second] = p_first
    table[second, first] = 1 - np.asarray(p_first)

    def judge(f: np.ndarray, s: np.ndarray) -> np.ndarray:
        return table[f, s]

    return judge


def inversions(estimate_: np.ndarray, reference: np.ndarray) -> float:
    """Pairs ordered one way by the reference and the other by the estimate; a tie in the
    estimate counts half (pairs tied in the reference are not counted)."""
    d_est = np.sign(estimate_[:, None] - estimate_[None, :])
    d_ref = np.sign(reference[:, None] - reference[None, :])
    iu = np.triu_indices(len(reference), 1)
    e, r = d_est[iu], d_ref[iu]
    keep = r != 0
    return float(np.sum(e[keep] == -r[keep]) + 0.5 * np.sum(e[keep] == 0))


def exhaustive_strengths(
    n: int, first: np.ndarray, second: np.ndarray, p_first: np.ndarray, prior: Prior = DEFAULT_PRIOR
) -> np.ndarray:
    """Bradley–Terry on the round-robin's decisions (an exact 0.5 is skipped)."""
    comps = [
        (int(f), int(s)) if p > 0.5 else (int(s), int(f))
        for f, s, p in zip(first, second, p_first, strict=True)
        if p != 0.5
    ]
    return fit(n, comps, prior)


def convergence(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    p_first: np.ndarray,
    rounds: int,
    seed: int,
    policies: tuple[str, ...] = POLICIES,
    prior: Prior = DEFAULT_PRIOR,
) -> pl.DataFrame:
    """Rows (policy, round, calls, inversions, share): after r rounds' worth of calls
    (r · ⌊n/2⌋), inversions against the exhaustive ranking and their share of all pairs.
    Binary policies see the decisions, `efficient` the probabilities."""
    reference = exhaustive_strengths(n, first, second, p_first, prior)
    soft = lookup_judge(n, first, second, p_first)
    hard = lookup_judge(n, first, second, (np.asarray(p_first) > 0.5).astype(float))
    total = n * (n - 1) / 2
    rows = []
    for policy in policies:
        judge = soft if policy == "efficient" else hard
        for r in range(1, rounds + 1):
            calls = min(r * (n // 2), int(total))
            est = estimate(policy, n, judge, calls, seed=seed, prior=prior)
            inv = inversions(est, reference)
            rows.append((policy, r, calls, inv, inv / total))
    return pl.DataFrame(
        rows, schema=["policy", "round", "calls", "inversions", "share"], orient="row"
    )


# ---- its section of the report


def convergence_figure(mean: pl.DataFrame):
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in POLICIES:
        line = mean.filter(pl.col("policy") == policy).sort("calls")
        ax.plot(line["calls"], line["share"], marker="o", ms=3, label=policy)
    ax.set_xlabel("judge calls per query")
    ax.set_ylabel("inversions vs the exhaustive ranking (share of pairs)")
    ax.legend()
    return fig


def read_convergence(curves: pl.DataFrame, rounds: int) -> str:
    if not curves.height:
        return "Not computed (analyses.convergence is off: it costs n(n−1)/2 judge calls a query)."
    mean = curves.group_by("policy", "round").agg(pl.col("calls", "share").mean())
    at = mean.filter(pl.col("round") == min(rounds, mean["round"].max())).sort("share")
    ranked = ", ".join(f"{p} {sections.pct(s, 1)}" for p, _, _, s in at.iter_rows())
    return (
        f"On {curves['query_id'].n_unique()} queries judged exhaustively, the share of pairs each "
        f"policy still orders differently from the exhaustive ranking after {at['round'][0]} "
        f"rounds (~{at['calls'].mean():.0f} calls a query): {ranked}. Lower is closer."
    )


def convergence_section(table: pl.DataFrame, cfg: PipelineConfig) -> sections.Section:
    mean = (
        table.group_by("policy", "round")
        .agg(pl.col("calls", "inversions", "share").mean())
        .sort("policy", "round")
    )
    return sections.Section(
        "Tournament convergence",
        read_convergence(table, cfg.tournament.rounds),
        [("mean over the queries, per policy and round", mean)],
        sections.figures(mean, convergence_figure, "inversions vs judge calls"),
    )


CONVERGENCE_SCHEMA = {
    "policy": pl.String, "round": pl.Int64, "calls": pl.Int64, "inversions": pl.Float64,
    "share": pl.Float64, "query_id": pl.String, "n": pl.Int64,
}  # fmt: skip


def outcome_p(outcome) -> float:
    """P(first better) of one judgment: the judge's probability, else its decision; NaN when
    it failed."""
    if not outcome.ok or outcome.value is None:
        return float("nan")
    if outcome.p_first is not None:
        return float(outcome.p_first)
    return 1.0 if outcome.value == 1 else 0.0


def round_robin_curves(
    judge, text: dict[str, str], cands: pl.DataFrame, chosen: list[str], seed: int,
    max_rounds: int, prior: Prior = DEFAULT_PRIOR,
) -> tuple[pl.DataFrame, int, int]:  # fmt: skip
    """Per chosen query, an exhaustive round-robin of its candidates (``cands``: query_id,
    candidate_id, position) with ``judge``, and each policy's convergence curve against it (at
    most ``max_rounds`` rounds); with the judgments made and those that failed."""
    parts, calls, failures = [], 0, 0
    for qid in chosen:
        members = cands.filter(pl.col("query_id") == qid).unique("candidate_id", keep="first")
        members = members.sort("position")["candidate_id"].to_list()
        n = len(members)
        first, second = round_robin(n, seed=seed + zlib.crc32(qid.encode()))
        out = judge.compare_batch(
            [
                (text[qid], text[members[f]], text[members[s]])
                for f, s in zip(first, second, strict=True)
            ]
        )
        p = np.array([outcome_p(o) for o in out])
        failures += int(np.sum(np.isnan(p)))
        p = np.where(np.isnan(p), 0.5, p)  # a failed judgment says nothing
        calls += len(out)
        rounds = min(n - 1, max_rounds)
        curve = convergence(n, first, second, p, rounds, seed, prior=prior)
        parts.append(curve.with_columns(pl.lit(qid).alias("query_id"), pl.lit(n).alias("n")))
    curves = pl.concat(parts) if parts else pl.DataFrame(schema=CONVERGENCE_SCHEMA)
    return curves, calls, failures
