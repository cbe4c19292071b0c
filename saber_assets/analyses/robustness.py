"""How robust the leaderboard's ordering is: to the gain, to the rating scale, to the ratings'
magnitudes, to the judge, and to the queries. Pure: the robustness asset calls it.

Each check rescores the stored runs (their candidate scores; no retriever is run again) and
compares the systems' ordering with the leaderboard's by Kendall's τ-b, listing the pairs whose
order flips:
- ``linear``: gain rel instead of 2^rel − 1;
- ``scale3``: the ratings rescaled to [0, 3];
- ``ranks``: each query's ratings replaced by their within-query ranks (on [0, 5]);
- ``judge``: a seeded share of the tournament's judgments re-judged by a second judge, the
  affected queries' Bradley–Terry ratings refitted (the ratings stage's own ``rate``);
- ``halves``: two disjoint random halves of the queries, τ between their orderings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from saber_assets.leaderboard.significance import (
    flipped_pairs,
    half_split_taus,
    kendall_tau,
    rescore,
    score_matrix,
)
from saber_assets.lib import sections
from saber_assets.lib.figures import pyplot
from saber_assets.ratings.bradley_terry import Prior
from saber_assets.ratings.rate import rate
from saber_assets.runs.evaluate import rescore_runs

TRANSFORMS = ("linear", "scale3", "ranks")
ROW_SCHEMA = {
    "setting": pl.String,
    "check": pl.String,
    "tau": pl.Float64,
    "flips": pl.Int64,
    "flipped_pairs": pl.String,
    "detail": pl.String,
}


def ordering(runs: pl.DataFrame, setting: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(systems, per-query matrix, mean nDCG per system) of one setting."""
    _, names, m = score_matrix(runs, setting)
    return names, m, (m.mean(axis=0) if m.size else np.zeros(len(names)))


def compare_orderings(setting: str, check: str, names, base, other, detail: str = "") -> dict:
    flips = flipped_pairs(names, base, other)
    return {"setting": setting, "check": check, "tau": kendall_tau(base, other),
            "flips": len(flips), "flipped_pairs": "; ".join(flips), "detail": detail}  # fmt: skip


def sample_judgments(judgments: pl.DataFrame, share: float, seed: int) -> pl.DataFrame:
    """A seeded share of the decided judgments (at least one when any exist), drawn from them
    sorted by (query, round, pair): the same rows whatever order they were read in (a frame's
    order can follow polars' per-process hashing, as a ``unique`` leaves it)."""
    keys = [c for c in ("query", "round", "a", "b") if c in judgments.columns]
    decided = judgments.filter(pl.col("winner").is_not_null()).sort(keys).with_row_index("_row")
    n = decided.height
    if n == 0:
        return decided.drop("_row")
    k = max(1, int(round(share * n)))
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(k, n), replace=False))
    return decided.filter(pl.col("_row").is_in(rows.tolist())).drop("_row")


def rejudge(
    sample: pl.DataFrame,
    text: dict[str, str],
    judge,
    swap_order: bool = False,
) -> pl.DataFrame:
    """The sampled judgments decided again by ``judge`` (``compare_batch`` over (query, first,
    second) texts): ``winner2`` (None where the second judge failed). ``swap_order`` shows the
    other candidate first (the presentation order as the second condition)."""
    items, firsts = [], []
    for q, a, b, shown in sample.select("query", "a", "b", "shown_first").iter_rows():
        first = shown if shown in (a, b) else a
        second = b if first == a else a
        if swap_order:
            first, second = second, first
        items.append((text[q], text[first], text[second]))
        firsts.append((first, second))
    outcomes = judge.compare_batch(items) if items else []
    winners = []
    for (first, second), out in zip(firsts, outcomes, strict=True):
        value = getattr(out, "value", out)
        winners.append(first if value == 1 else second if value == 2 else None)
    return sample.with_columns(pl.Series("winner2", winners, dtype=pl.String))


def agreement(rejudged: pl.DataFrame) -> tuple[float, int]:
    """Share of the re-judged pairs (the second judge decided) with the same winner, and how many."""
    both = rejudged.filter(pl.col("winner2").is_not_null())
    if both.height == 0:
        return float("nan"), 0
    return float((both["winner"] == both["winner2"]).mean()), both.height


def refit_ratings(
    judgments: pl.DataFrame, rejudged: pl.DataFrame, candidates: pl.DataFrame, prior: Prior
) -> pl.DataFrame:
    """The affected queries' ratings with the second judge's decisions in place of the first's
    (its failures keep the first's decision): query_id, candidate_id, rating."""
    key = ["query", "a", "b", "round"]
    swap = rejudged.filter(pl.col("winner2").is_not_null()).select(*key, "winner2")
    merged = (
        judgments.join(swap, on=key, how="left")
        .with_columns(pl.coalesce("winner2", "winner").alias("winner"))
        .drop("winner2")
    )
    affected = swap["query"].unique().to_list()
    # the candidates alone: stored ratings beside them would be what the refit reads back
    cands = candidates.filter(pl.col("query_id").is_in(affected)).select(
        "query_id", "candidate_id", "position"
    )
    if cands.height == 0:
        return pl.DataFrame(schema={"query_id": pl.String, "candidate_id": pl.String,
                                    "rating": pl.Float64})  # fmt: skip
    # decisions only: soft probabilities belong to the first judge's calls
    merged = merged.drop("p_first") if "p_first" in merged.columns else merged
    fitted = rate(cands, merged.filter(pl.col("query").is_in(affected)), prior)
    return fitted.select("query_id", "candidate_id", "rating")


def relevance_with(
    queries: pl.DataFrame, doc_ids: Sequence[str], new: pl.DataFrame
) -> dict[str, list[float]]:
    """Each benchmark query's grades (in its candidate order) with ``new`` ratings in place."""
    table = {(q, c): r for q, c, r in new.select("query_id", "candidate_id", "rating").iter_rows()}
    out = {}
    for qid, cands, rel in queries.select("id", "candidates", "relevance_scores").iter_rows():
        out[qid] = [table.get((qid, doc_ids[c]), r) for c, r in zip(cands, rel, strict=True)]
    return out


def robustness_table(
    runs: pl.DataFrame,
    relevance: dict[str, list[float]],
    k: int,
    seed: int,
    judge_relevance: dict[str, list[float]] | None = None,
    judge_detail: str = "",
    splits: int = 200,
) -> pl.DataFrame:
    """One row per setting × check: τ to the leaderboard's ordering and the pairs that flip."""
    rows = []
    for setting in sorted(runs["setting"].unique().to_list()):
        names, m, base = ordering(runs, setting)
        if len(names) < 2:
            continue
        for t in TRANSFORMS:
            _, _, other = ordering(rescore(runs, relevance, k, t), setting)
            rows.append(compare_orderings(setting, t, names, base, other))
        if judge_relevance is not None:
            _, _, other = ordering(rescore_runs(runs, judge_relevance, k), setting)
            moved = f"; mean |ΔnDCG@{k}| of the systems {np.abs(other - base).mean():.4f}"
            rows.append(
                compare_orderings(setting, "judge", names, base, other, judge_detail + moved)
            )
        taus = half_split_taus(m, splits, seed)
        rows.append({"setting": setting, "check": "halves", "tau": float(taus.mean()),
                     "flips": None, "flipped_pairs": "",
                     "detail": f"{splits} splits of {len(m)} queries: 5th percentile τ "
                               f"{np.quantile(taus, 0.05):.3f}"})  # fmt: skip
    return pl.DataFrame(rows, schema=ROW_SCHEMA)


def read_robustness(table: pl.DataFrame, agreement_value: float | None, judge_label: str) -> str:
    """One paragraph read off the numbers."""
    if table.height == 0:
        return "Fewer than two systems per setting: no ordering to test."
    parts = []
    for check, label in (("linear", "linear gain"), ("scale3", "ratings on [0, 3]"),
                         ("ranks", "rating ranks instead of Bradley–Terry magnitudes"),
                         ("judge", f"the second judge ({judge_label})"),
                         ("halves", "half of the queries")):  # fmt: skip
        part = table.filter(pl.col("check") == check)
        if part.height == 0:
            continue
        tau = part["tau"]
        flips = int(part["flips"].fill_null(0).sum())
        parts.append(
            f"{label}: τ {tau.min():.3f}–{tau.max():.3f} over the settings"
            + (f", {flips} pair(s) flip" if check != "halves" else "")
        )
    text = "Kendall τ of each ordering to the leaderboard's — " + "; ".join(parts) + "."
    if agreement_value is not None and agreement_value == agreement_value:
        text += f" The second judge agrees with the first on {agreement_value:.1%} of the re-judged pairs."
    weakest = table.sort("tau").row(0, named=True)
    text += (
        f" The least stable is {weakest['check']} in {weakest['setting']} (τ {weakest['tau']:.3f}):"
        " a τ near 1 means the ranking survives that change; pairs that flip were close to begin with."
    )
    return text


# ---- its section of the report


def robustness_figure(table: pl.DataFrame):
    """Kendall τ to the leaderboard's ordering, per check and setting."""
    plt = pyplot()

    checks = list(dict.fromkeys(table["check"]))
    settings = list(dict.fromkeys(table["setting"]))
    fig, ax = plt.subplots(figsize=(1.3 * len(checks) + 2, 3.6), layout="constrained")
    width = 0.8 / max(len(settings), 1)
    for k, setting in enumerate(settings):
        part = table.filter(pl.col("setting") == setting)
        tau = {c: t for c, t in part.select("check", "tau").iter_rows()}
        x = np.arange(len(checks)) + k * width
        ax.bar(x, [tau.get(c, np.nan) for c in checks], width, label=setting)
    ax.set_xticks(np.arange(len(checks)) + width * (len(settings) - 1) / 2, checks)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.set_ylim(min(0.0, float(table["tau"].min()) - 0.05), 1.05)
    ax.set_ylabel("Kendall τ to the leaderboard")
    ax.set_title("robustness of the system ordering", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def read_robustness_section(table: pl.DataFrame) -> str:
    """The robustness analysis's reading, from its table alone."""
    from saber_assets.analyses.robustness import read_robustness

    if table.height == 0:
        return "No robustness figures (no runs yet)."
    text = read_robustness(table, None, "see the table's detail")
    judge = table.filter(pl.col("check") == "judge")
    return text + (f" Second judge: {judge['detail'][0]}." if judge.height else "")


robustness_section = sections.table_section(
    "Robustness of the ordering", read_robustness_section,
    "Kendall τ to the leaderboard's ordering, per setting and check",
    robustness_figure, "τ per check",
)  # fmt: skip


def second_judge_relevance(
    bench, judgments: pl.DataFrame, ratings: pl.DataFrame, text: dict[str, str], judge,
    swap: bool, share: float, seed: int, prior: Prior,
) -> tuple[dict, dict, float | None, int, str]:  # fmt: skip
    """The second judge on a seeded ``share`` of the tournament's pairs (``swap``: each shown in
    the other order), the affected queries' ratings refitted: (the grades refitted with the
    first judge's answers, with the second's, their agreement, the pairs re-judged, a line
    saying so). Both from the same refit, so that an identical judge changes nothing."""
    sample = sample_judgments(judgments, share, seed)
    rejudged = rejudge(sample, text, judge, swap_order=swap)
    agree, n_pairs = agreement(rejudged)
    base = refit_ratings(judgments, rejudged.with_columns(winner2=pl.col("winner")), ratings, prior)
    new = refit_ratings(judgments, rejudged, ratings, prior)
    doc_ids = bench.documents["id"].to_list()
    rel = relevance_with(bench.queries, doc_ids, base)
    judge_rel = relevance_with(bench.queries, doc_ids, new)
    detail = f"{n_pairs} re-judged pairs, agreement {agree:.3f}" if n_pairs else "no pair re-judged"
    return rel, judge_rel, agree, n_pairs, detail
