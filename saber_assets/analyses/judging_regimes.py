"""The paper's alternative judging regimes, against the tournament's Bradley–Terry ranking.

On a seeded sample of candidate pairs (two candidates of the same query):
- ``pairwise_single``: the pair judge once, as the tournament asks it (its deterministic request);
- ``majority_vote_<n>``: the pair judge ``n`` times, independent draws at a sampling temperature
  with the display order alternating (draw 0 is the single answer); the side with more votes
  wins, a margin ≤ ``tie_margin`` is a tie (5 draws: 3–2 is a tie);
- ``ordinal``: each query–candidate pair scored on its own on an absolute 0–100 scale, after
  reasoning (the paper's ordinal prompt); the higher score wins, equal scores are a tie.
Each choice is scored against the BT ranking's order by the human-agreement rule (1 equal, 0.5
when exactly one side is a tie, 0 otherwise), overall and by the pair's distance in the final
ranking (Δr ≥ 0, 25, 50). A failed judgment is no prediction, counted, never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from saber_assets.lib import sections
from saber_assets.lib.figures import pyplot
from saber_assets.study.human_agreement import (
    BUCKETS,
    agreement,
    kappa_columns,
    rank_gap,
    ranking_choice,
    rating_ranks,
)

Pair = tuple[str, str, str]  # (query, a, b)

SUMMARY_SCHEMA = {
    "regime": pl.String, "delta_r_at_least": pl.Int64, "pairs": pl.Int64,
    "agreement": pl.Float64, "tie_share": pl.Float64, "failed": pl.Int64,
    "kappa": pl.Float64, "kappa_low": pl.Float64, "kappa_high": pl.Float64,
    "kappa_weighted": pl.Float64,
}  # fmt: skip


def sample_pairs(ratings: pl.DataFrame, n_pairs: int, seed: int) -> list[Pair]:
    """``n_pairs`` distinct unordered candidate pairs: a query uniformly, then two of its rated
    candidates uniformly, in a random display order (so position bias cannot line up with the
    ranking). Fewer when the queries have fewer pairs."""
    rng = np.random.default_rng([seed, 13])
    by_query = {
        q: sorted(frame["candidate_id"].to_list())
        for (q,), frame in ratings.group_by("query_id", maintain_order=True)
    }
    queries = sorted(q for q, c in by_query.items() if len(c) >= 2)
    total = sum(len(by_query[q]) * (len(by_query[q]) - 1) // 2 for q in queries)
    n_pairs = min(n_pairs, total)
    seen: set[tuple[str, frozenset]] = set()
    out: list[Pair] = []
    while len(out) < n_pairs:
        q = queries[rng.integers(len(queries))]
        i, j = rng.choice(len(by_query[q]), 2, replace=False)
        a, b = by_query[q][i], by_query[q][j]
        if (q, frozenset((a, b))) in seen:
            continue
        seen.add((q, frozenset((a, b))))
        out.append((q, a, b))
    return out


def majority(votes_a: int, votes_b: int, tie_margin: int) -> str | None:
    """'a', 'b' or 'tie' from the vote counts; None when nobody voted."""
    if votes_a + votes_b == 0:
        return None
    if abs(votes_a - votes_b) <= tie_margin:
        return "tie"
    return "a" if votes_a > votes_b else "b"


def ordinal_choice(score_a: int | None, score_b: int | None) -> str | None:
    if score_a is None or score_b is None:
        return None
    return "a" if score_a > score_b else "b" if score_b > score_a else "tie"


def regime_choices(
    pairs: Sequence[Pair],
    text: dict[str, str],
    pair_judge,
    ordinal_judge,
    votes: int = 5,
    tie_margin: int = 1,
    temperature: float = 0.7,
) -> tuple[dict[str, dict[Pair, str]], dict[str, int]]:
    """Each regime's choice per pair (absent where it failed), and its failed-judgment count."""
    pairs = [p for p in pairs if all(x in text for x in p)]
    counts = {p: [0, 0] for p in pairs}
    single: dict[Pair, str] = {}
    failed = {"pairwise_single": 0, f"majority_vote_{votes}": 0, "ordinal": 0}
    for k in range(votes):
        flipped = k % 2 == 1
        items = [(text[q], text[b], text[a]) if flipped else (text[q], text[a], text[b])
                 for q, a, b in pairs]  # fmt: skip
        for pair, out in zip(pairs, pair_judge.compare_batch(items, k, temperature), strict=True):
            if not out.ok or out.value is None:
                failed[f"majority_vote_{votes}"] += 1
                failed["pairwise_single"] += k == 0
                continue
            first_won = out.value == 1
            a_won = first_won != flipped
            counts[pair][0 if a_won else 1] += 1
            if k == 0:
                single[pair] = "a" if a_won else "b"
    voted = {p: majority(va, vb, tie_margin) for p, (va, vb) in counts.items()}
    docs = list(dict.fromkeys((q, c) for q, a, b in pairs for c in (a, b)))
    scored = ordinal_judge.score_batch([(text[q], text[c]) for q, c in docs])
    score = {}
    for doc, out in zip(docs, scored, strict=True):
        if out.ok and out.value is not None:
            score[doc] = out.value
        else:
            failed["ordinal"] += 1
    ordinal = {p: ordinal_choice(score.get((p[0], p[1])), score.get((p[0], p[2]))) for p in pairs}
    choices = {
        "pairwise_single": single,
        f"majority_vote_{votes}": {p: c for p, c in voted.items() if c is not None},
        "ordinal": {p: c for p, c in ordinal.items() if c is not None},
    }
    return choices, failed


def regime_agreement(
    pairs: Sequence[Pair],
    choices: dict[str, dict[Pair, str]],
    ratings: pl.DataFrame,
    failed: dict[str, int] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-pair rows: query, a, b, delta_r, bt, and each regime's choice and score; summary by
    regime and Δr bucket: pairs scored, mean agreement, share of ties, and Cohen's κ against the
    BT ranking's choice with its bootstrap interval and the weighted κ)."""
    rating, ranks = rating_ranks(ratings)
    rows = []
    for q, a, b in pairs:
        bt = ranking_choice(rating, q, a, b)
        row = {"query": q, "a": a, "b": b, "delta_r": rank_gap(ranks, q, a, b), "bt": bt}
        for name, got in choices.items():
            pred = got.get((q, a, b))
            row[f"{name}_choice"] = pred
            row[name] = agreement(pred, bt) if bt is not None else None
        rows.append(row)
    schema = {"query": pl.String, "a": pl.String, "b": pl.String, "delta_r": pl.Int64,
              "bt": pl.String}  # fmt: skip
    for name in choices:
        schema |= {f"{name}_choice": pl.String, name: pl.Float64}
    per_pair = pl.DataFrame(rows, schema=schema)
    summary = []
    for bucket in BUCKETS:
        part = per_pair.filter(pl.col("delta_r") >= bucket)
        for n_name, name in enumerate(choices):
            scored = part.filter(pl.col(name).is_not_null())
            said = list(zip(scored["bt"], scored[f"{name}_choice"], strict=True))
            summary.append(
                {
                    "regime": name,
                    "delta_r_at_least": bucket,
                    "pairs": scored.height,
                    "agreement": float(scored[name].mean()) if scored.height else None,
                    "tie_share": (
                        float((scored[f"{name}_choice"] == "tie").mean()) if scored.height else None
                    ),
                    "failed": (failed or {}).get(name, 0) if bucket == 0 else None,
                    **kappa_columns(said, seed=1000 * n_name + bucket),
                }
            )
    return per_pair, pl.DataFrame(summary, schema=SUMMARY_SCHEMA)


# ---- its section of the report


def regimes_figure(summary: pl.DataFrame):
    plt = pyplot()

    regimes = list(dict.fromkeys(summary["regime"]))
    buckets = sorted(set(summary["delta_r_at_least"]))
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / max(len(regimes), 1)
    for k, regime in enumerate(regimes):
        got = dict(
            summary.filter(pl.col("regime") == regime)
            .select("delta_r_at_least", "agreement")
            .iter_rows()
        )
        ax.bar(
            np.arange(len(buckets)) + k * width,
            [got.get(b) or 0 for b in buckets],
            width,
            label=regime.replace("_", " "),
        )
    ax.set_xticks(np.arange(len(buckets)) + 0.4 - width / 2, [f"Δr ≥ {b}" for b in buckets])
    ax.set_ylim(0, 1)
    ax.set_ylabel("agreement with the BT ranking")
    ax.legend(fontsize=7)
    return fig


def read_regimes(summary: pl.DataFrame) -> str:
    if not summary.height:
        return "Not computed (analyses.regime_pairs is 0)."
    base, parts = sections.agreement_parts(
        summary, "regime", lambda r: f" ({sections.pct(r['tie_share'])} ties)"
    )
    return (
        f"Agreement with the tournament's BT order on {base['pairs'].max()} sampled pairs "
        f"(1 = same order, ½ for a tie): {parts}. Absolute grades tie often on "
        "near candidates; agreement is read by rank distance in the table."
    )


regimes_section = sections.table_section(
    "Judging regimes", read_regimes, "agreement with the BT ranking by rank distance",
    regimes_figure, "agreement by Δr",
)  # fmt: skip


def configured_regimes(pairs, text: dict[str, str], tasks, acfg):
    """``regime_choices`` with the task set's judges and the `analyses.regime_*` settings."""
    return regime_choices(
        pairs, text, tasks.pair_judge, tasks.ordinal_judge, acfg.regime_votes,
        acfg.regime_tie_margin, acfg.regime_temperature,
    )  # fmt: skip
