"""Tournament simulation: how many judge calls does a good ranking of 150 candidates need?

    uv run python benchmarks/tournament.py [--repeats 5] [--bias 0.0] [--out benchmarks/out]

A simulated judge with known latent strengths and Bradley–Terry noise (P(a beats b) =
σ(s_a − s_b + bias·[a shown first])). For each policy (random pairing, Swiss, adaptive) and number
of rounds, Bradley–Terry strengths are fitted to the judgments and compared with the exhaustive
round robin (all 11,175 pairs) by pairwise inversions, and with the truth by Kendall τ. Prints the
calls each policy needs to reach Swiss R=20's inversion level, times pairing + BT for 1000
queries × 20 rounds (judge excluded), and writes a plot of inversions vs calls.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from saber_assets.ratings.bradley_terry import fit, fit_many
from saber_assets.tournament.adaptive import pair_round_adaptive
from saber_assets.tournament.engine import MemoryStore, TournamentQuery, run_tournament
from saber_assets.tournament.swiss import pair_round
from saber_resources.tasks import Outcome

N = 150


class SimJudge:
    """P(first shown wins) = σ(s_first − s_second + bias). ``consistent`` (default) fixes one draw per
    presentation (first, second), like an LLM judge at temperature 0 whose answers are cached:
    asking the same question again gives the same answer. Otherwise every call draws anew."""

    def __init__(self, s, bias, rng, consistent=True):
        self.s, self.bias, self.rng = s, bias, rng
        self.u = rng.random((len(s), len(s))) if consistent else None

    def __call__(self, first, second):
        p = 1 / (1 + np.exp(-(self.s[first] - self.s[second] + self.bias)))
        u = self.u[first, second] if self.u is not None else self.rng.random()
        return first if u < p else second


def inversions(a: np.ndarray, b: np.ndarray) -> int:
    """Pairs ordered differently by the two score vectors (ties in either count as half)."""
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    iu = np.triu_indices(len(a), 1)
    prod = (da * db)[iu]
    return int(np.sum(prod < 0) + 0.5 * np.sum(prod == 0))


def random_round(n, played, rng):
    order = rng.permutation(n)
    pairs, free = [], list(order)
    while len(free) > 1:
        a = free.pop(0)
        for k, b in enumerate(free):
            if frozenset((a, b)) not in played:
                pairs.append((a, b))
                free.pop(k)
                break
    return pairs


def play(policy, rounds, judge, rng, alpha=0.1, budget=None):
    """Judgments of one query under a policy; returns (calls, comparisons) after each round."""
    wins = np.zeros(N, dtype=int)
    played: set = set()
    comps: list = []
    trace = []
    for _ in range(rounds):
        if policy == "swiss":
            pairs = pair_round(wins, played, rng)
        elif policy == "random":
            pairs = random_round(N, played, rng)
        else:
            pairs = pair_round_adaptive(fit(N, comps, alpha), played, rng, budget)
        for a, b in pairs:
            first, second = (a, b) if rng.random() < 0.5 else (b, a)
            w = judge(first, second)
            lo = b if w == a else a
            wins[w] += 1
            comps.append((w, lo))
            played.add(frozenset((a, b)))
        trace.append((len(comps), list(comps)))
    return trace


def calls_to_reach(points, target):
    """Interpolated calls at which a (calls, inversions) curve first reaches the target."""
    pts = sorted(points)
    for (c0, i0), (c1, i1) in zip(pts, pts[1:], strict=False):
        if i1 <= target <= i0 and i0 != i1:
            return c0 + (c1 - c0) * (i0 - target) / (i0 - i1)
        if i0 <= target:
            return c0
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--bias", type=float, default=0.0, help="position bias (log-odds for the first shown)"
    )
    ap.add_argument("--spread", type=float, default=1.5, help="std of the latent strengths")
    ap.add_argument(
        "--noisy",
        action="store_true",
        help="independent draw per call instead of a consistent judge",
    )
    ap.add_argument("--out", default="benchmarks/out")
    args = ap.parse_args()
    policies = {
        "random": [5, 10, 15, 20, 25, 30],
        "swiss": [5, 10, 15, 20, 25, 30],
        "adaptive": [3, 5, 7, 10, 15, 20],
    }
    curves = {p: {} for p in policies}
    taus = {p: {} for p in policies}
    for rep in range(args.repeats):
        rng = np.random.default_rng(1000 + rep)
        s = rng.normal(0, args.spread, N)
        judge = SimJudge(s, args.bias, rng, consistent=not args.noisy)
        rr = []
        for a in range(N):
            for b in range(a + 1, N):
                first, second = (a, b) if rng.random() < 0.5 else (b, a)
                w = judge(first, second)
                rr.append((w, b if w == a else a))
        exhaustive = fit(N, rr)
        for policy, rounds_list in policies.items():
            trace = play(policy, max(rounds_list), judge, np.random.default_rng(rep))
            for r in rounds_list:
                calls, comps = trace[r - 1]
                est = fit(N, comps)
                curves[policy].setdefault(r, []).append((calls, inversions(est, exhaustive)))
                taus[policy].setdefault(r, []).append(kendalltau(est, s).statistic)
    kind = (
        "noisy (fresh draw per call)" if args.noisy else "consistent (same question, same answer)"
    )
    print(
        f"{args.repeats} simulated queries, {N} candidates, strengths ~ N(0, {args.spread}), position bias {args.bias}, judge {kind}"
    )
    print(f"exhaustive round robin: {N * (N - 1) // 2:,} calls (reference ranking)")
    print(f"{'policy':<9} {'rounds':>6} {'calls':>7} {'inversions':>11} {'tau vs truth':>13}")
    mean_pts = {}
    for policy, rounds_list in policies.items():
        pts = []
        for r in rounds_list:
            c = np.mean([x[0] for x in curves[policy][r]])
            inv = np.mean([x[1] for x in curves[policy][r]])
            pts.append((c, inv))
            print(f"{policy:<9} {r:>6} {c:>7.0f} {inv:>11.0f} {np.mean(taus[policy][r]):>13.3f}")
        mean_pts[policy] = pts
    target = dict(zip(policies["swiss"], [p[1] for p in mean_pts["swiss"]], strict=True))[20]
    swiss20_calls = dict(zip(policies["swiss"], [p[0] for p in mean_pts["swiss"]], strict=True))[20]
    print(f"Swiss R=20: {swiss20_calls:.0f} calls, {target:.0f} inversions of {N * (N - 1) // 2:,}")
    for policy in policies:
        need = calls_to_reach(mean_pts[policy], target)
        print(
            f"  calls for {policy} to reach that: {need:.0f} ({need / swiss20_calls:.0%} of Swiss-20)"
        )

    # pairing + BT for 1000 queries x 20 rounds with an instant judge (judge time excluded)
    strength = {}
    queries = []
    rng = np.random.default_rng(5)
    for q in range(1000):
        cands = [f"{q}:{k}" for k in range(N)]
        strength.update(zip(cands, rng.normal(0, args.spread, N), strict=True))
        queries.append(TournamentQuery(f"q{q}", "", cands, cands))

    class Instant:
        backend, model, version = "sim", "sim", "sim/v1"

        def compare_batch(self, items):
            return [Outcome(1 if strength[a] >= strength[b] else 2, raw="1") for _, a, b in items]

    t0 = time.perf_counter()
    standings, stats = run_tournament(
        queries, Instant(), MemoryStore(), rounds=20, seed=1, chunk=100_000
    )
    t1 = time.perf_counter()
    fit_many([(st.n, st.comparisons) for st in standings.values()])
    t2 = time.perf_counter()
    print(
        f"1000 queries x 20 Swiss rounds ({stats['requested']:,} judgments): pairing + bookkeeping {t1 - t0:.1f}s, BT {t2 - t1:.1f}s, total {t2 - t0:.1f}s (one core)"
    )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for policy, pts in mean_pts.items():
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=policy)
    ax.axhline(target, color="grey", ls=":", lw=1)
    ax.set_xlabel("judge calls per query")
    ax.set_ylabel(f"inversions vs exhaustive BT (of {N * (N - 1) // 2:,})")
    ax.set_title(f"{N} candidates, simulated BT judge")
    ax.legend()
    path = out / "tournament_inversions.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
