"""Tournament policies against the latent truth: how many judge calls does a good ranking need?

    uv run python perf/tournament.py [--repeats 3] [--out perf/out]
    (--repeats 40: the spread between latent draws, as a standard error per cell)

Simulated queries of n = 150 candidates with latent strengths s ~ N(0, 1.5²) and a judge whose
log-odds for "the first shown is better" are ℓ = s_first − s_second + b + ε, ε ~ N(0, σ²) drawn
per call, for σ ∈ {0.5, 1, 1.5, 2} and position bias b ∈ {0, 0.5}. Swiss, random and adaptive
get binary judgments (first wins iff ℓ > 0); `efficient` gets soft ones (p = sigmoid(ℓ)) and,
as a control, binary ones. Everything runs through `saber_assets.tournament.simulate.estimate`:
the engine's own pairing and estimation. Quality: Kendall τ between estimated and latent
strengths, and nDCG@10 of the latent relevance (latent strengths rescaled to [0, 5]) when the
candidates are ranked by the estimate. Reports the calls each policy needs to reach Swiss-20's τ
(interpolated), times pairing + estimation for 1000 queries × 1500 calls, writes a table and a
plot under perf/out/.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from saber_assets.ratings.bradley_terry import rescale
from saber_assets.runs.metrics import ndcg_at_k
from saber_assets.tournament.simulate import estimate

N = 150
SWISS20 = 20 * (N // 2)  # 1,500 calls
GRIDS = {
    "swiss": [300, 600, 900, 1200, SWISS20],
    "random": [300, 600, 900, 1200, SWISS20, 1800],
    "adaptive": [300, 600, 900, 1200, SWISS20],
    "efficient": [150, 225, 300, 375, 450, 525, 600, 750, 900, 1200],
    "efficient-binary": [600, SWISS20],
}


def make_judge(s: np.ndarray, sigma: float, bias: float, seed: int, soft: bool):
    rng = np.random.default_rng(seed)

    def judge(first: np.ndarray, second: np.ndarray) -> np.ndarray:
        logit = s[first] - s[second] + bias + rng.normal(0, sigma, len(first))
        return 1 / (1 + np.exp(-logit)) if soft else (logit > 0).astype(float)

    return judge


def quality(est: np.ndarray, s: np.ndarray) -> tuple[float, float]:
    return float(kendalltau(est, s).statistic), ndcg_at_k(est, rescale(s), 10)


def calls_to_reach(points: list[tuple[float, float]], target: float) -> float:
    """Interpolated calls at which an increasing (calls, τ) curve first reaches the target."""
    pts = sorted(points)
    if pts and pts[0][1] >= target:
        return pts[0][0]
    for (c0, t0), (c1, t1) in zip(pts, pts[1:], strict=False):
        if t0 < target <= t1:
            return c0 + (c1 - c0) * (target - t0) / (t1 - t0)
    return float("nan")


def _time_queries(queries: range) -> None:
    s = np.random.default_rng(5).normal(0, 1.5, N)
    for q in queries:
        estimate("efficient", N, make_judge(s, 1.0, 0.5, q, True), SWISS20, seed=q)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="perf/out")
    ap.add_argument("--timing-queries", type=int, default=1000)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, curves = [], {}
    print(
        f"n = {N}, s ~ N(0, 1.5^2), {args.repeats} queries per setting; Swiss-20 = {SWISS20} calls"
    )
    header = f"{'sigma':>5} {'bias':>4}  {'Swiss-20 tau':>12}  " + "  ".join(
        f"{p + ' calls':>18}" for p in ("random", "adaptive", "efficient", "efficient-binary")
    )
    print(header)
    for sigma in (0.5, 1.0, 1.5, 2.0):
        for bias in (0.0, 0.5):
            res: dict[str, dict[int, list]] = {p: {} for p in GRIDS}
            for rep in range(args.repeats):
                s = np.random.default_rng(1000 + rep).normal(0, 1.5, N)
                for policy, grid in GRIDS.items():
                    soft = policy == "efficient"
                    name = "efficient" if policy.startswith("efficient") else policy
                    for calls in grid:
                        judge = make_judge(s, sigma, bias, 7 + rep, soft)
                        est = estimate(name, N, judge, calls, seed=rep)
                        res[policy].setdefault(calls, []).append(quality(est, s))
            mean = {
                p: [(c, *np.mean(v, axis=0)) for c, v in sorted(d.items())] for p, d in res.items()
            }
            # the spread between latent draws: each draw's own calls-to-Swiss-20 for efficient
            per_draw = np.array(
                [
                    calls_to_reach(
                        [(c, v[r][0]) for c, v in sorted(res["efficient"].items())],
                        res["swiss"][SWISS20][r][0],
                    )
                    / SWISS20
                    for r in range(args.repeats)
                ]
            )
            se = float(np.nanstd(per_draw, ddof=1) / np.sqrt(np.sum(~np.isnan(per_draw))))
            target = dict((c, t) for c, t, _ in mean["swiss"])[SWISS20]
            need = {
                p: calls_to_reach([(c, t) for c, t, _ in pts], target) for p, pts in mean.items()
            }
            curves[(sigma, bias)] = mean
            rows.append((sigma, bias, target, need, mean, se))
            print(
                f"{sigma:>5} {bias:>4}  {target:>12.3f}  "
                + "  ".join(
                    f"{need[p]:>8.0f} ({need[p] / SWISS20:>5.0%})"
                    for p in ("random", "adaptive", "efficient", "efficient-binary")
                )
                + f"  efficient per draw: ±{se:.1%} (standard error)"
            )

    # pairing + estimation for many queries (an instant soft judge; judge time excluded), on
    # one core and on two (queries split in halves: domains are separate runs anyway)
    from concurrent.futures import ProcessPoolExecutor

    q = args.timing_queries
    one = time.perf_counter()
    _time_queries(range(0, 50))
    one = (time.perf_counter() - one) * q / 50
    t0 = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        list(pool.map(_time_queries, [range(0, q // 2), range(q // 2, q)]))
    dt = time.perf_counter() - t0
    print(
        f"efficient: pairing + estimation for {q} queries x {SWISS20} calls: "
        f"{dt:.1f}s on 2 cores ({one:.1f}s on one core, extrapolated from 50 queries)"
    )

    lines = [
        "| sigma | bias | Swiss-20 tau | calls to reach it: random | adaptive | efficient (soft) | efficient (binary) | efficient: s.e. between draws |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for sigma, bias, target, need, _, se in rows:
        cells = [
            f"{need[p]:.0f} ({need[p] / SWISS20:.0%})"
            for p in ("random", "adaptive", "efficient", "efficient-binary")
        ]
        lines.append(
            f"| {sigma} | {bias} | {target:.3f} | " + " | ".join(cells) + f" | ±{se:.1%} |"
        )
    lines.append(
        f"\nPairing + estimation: {q} queries x {SWISS20} calls in {dt:.1f}s on 2 cores "
        f"({one:.1f}s on one)."
    )
    (out / "tournament_policies.md").write_text("\n".join(lines) + "\n")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for policy, pts in curves[(1.0, 0.5)].items():
        c = [p[0] for p in pts]
        axes[0].plot(c, [p[1] for p in pts], marker="o", label=policy)
        axes[1].plot(c, [p[2] for p in pts], marker="o", label=policy)
    axes[0].axvline(SWISS20, color="grey", ls=":", lw=1)
    axes[0].set_ylabel("Kendall tau vs latent strengths")
    axes[1].set_ylabel("nDCG@10 of latent relevance")
    for ax in axes:
        ax.set_xlabel("judge calls per query (n = 150)")
        ax.legend()
    fig.suptitle("sigma = 1, position bias 0.5")
    path = out / "tournament_policies.png"
    fig.savefig(path, dpi=100, bbox_inches="tight")
    print(f"table: {out / 'tournament_policies.md'}\nplot: {path}")


if __name__ == "__main__":
    main()
