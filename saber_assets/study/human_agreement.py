"""Agreement with people: human pairwise annotations (query, a, b, choice ∈ {a, b, tie},
annotator, and optionally shown_first: the candidate people saw first) against the pairwise
judge and the Bradley–Terry ranking. The judge is asked once per pair, as the paper does: in the
order people saw it where the labels record it, else in one seeded order. A prediction scores 1 when
it equals the human's choice, 0.5 when exactly one of the two is a tie, 0 otherwise; reported
overall and by the pair's distance in the final ranking (Δr ≥ 0, 25, 50), with the agreement
between annotators where a pair has two or more.

Raw agreement is the paper's figure; beside it, corrected for chance (UMBRELA reports it):
Cohen's κ over the three choices and a linearly weighted κ over their order (a < tie < b: a
tie is half-way), each predictor's κ with a seeded bootstrap 95% interval over its annotations
(``cohen_kappa``, checked against scikit-learn's ``cohen_kappa_score``)."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.config import REPO_ROOT
from saber_assets.lib import sections

CHOICES = ("a", "b", "tie")
BUCKETS = (0, 25, 50)
COLUMNS = ("query", "a", "b", "choice", "annotator")
OPTIONAL = ("shown_first",)


SUMMARY_SCHEMA = {
    "predictor": pl.String, "delta_r_at_least": pl.Int64, "annotations": pl.Int64,
    "agreement": pl.Float64, "paper": pl.Float64, "kappa": pl.Float64, "kappa_low": pl.Float64,
    "kappa_high": pl.Float64, "kappa_weighted": pl.Float64, "alpha": pl.Float64,
    "alpha_low": pl.Float64, "alpha_high": pl.Float64,
}  # fmt: skip
# the choices in their order, for the weighted κ: a tie lies between the two candidates
ORDER = {"a": 0, "tie": 1, "b": 2}
KAPPA_RESAMPLES = 1000


def _kappas(x: np.ndarray, y: np.ndarray, weighted: bool) -> np.ndarray:
    """κ of each row of ``x`` against the same row of ``y`` (codes 0..2; rows: resamples)."""
    k = len(ORDER)
    cells = x * k + y
    counts = np.stack([np.bincount(r, minlength=k * k) for r in cells]).reshape(-1, k, k)
    n = counts.sum(axis=(1, 2), keepdims=True)
    observed = counts / n
    expected = observed.sum(2, keepdims=True) * observed.sum(1, keepdims=True)
    idx = np.arange(k)
    w = (
        np.abs(idx[:, None] - idx[None, :]) / (k - 1)
        if weighted
        else (idx[:, None] != idx).astype(float)
    )
    den = (w * expected).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 1 - (w * observed).sum(axis=(1, 2)) / den, np.nan)


def cohen_kappa(
    first: list[str], second: list[str], weighted: bool = False, seed: int | None = None
) -> tuple[float | None, float | None, float | None]:
    """(κ, low, high) of two raters' choices: Cohen's κ (``weighted``: linear weights over
    ``ORDER``), with a 95% bootstrap interval over the rated items when ``seed`` is given. None
    where chance agreement is total (a single choice throughout)."""
    if not first:
        return None, None, None
    x = np.array([ORDER[c] for c in first])
    y = np.array([ORDER[c] for c in second])
    point = float(_kappas(x[None], y[None], weighted)[0])
    if np.isnan(point):
        return None, None, None
    if seed is None:
        return point, None, None
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(x), size=(KAPPA_RESAMPLES, len(x)))
    boot = _kappas(x[draws], y[draws], weighted)
    boot = boot[~np.isnan(boot)]
    low, high = np.percentile(boot, [2.5, 97.5]) if boot.size else (None, None)
    return point, float(low), float(high)


def annotator_alpha(
    items: list[dict[str, str]], seed: int, resamples: int = 200
) -> tuple[float | None, float | None, float | None]:
    """Krippendorff's α across annotators (the ``krippendorff`` package, ordinal over
    ``ORDER``), each item an {annotator: choice} of a pair two or more labelled, with a 95%
    bootstrap interval over the items."""
    import krippendorff

    items = [i for i in items if len(i) >= 2]
    coders = sorted({c for i in items for c in i})
    if len(items) < 2:
        return None, None, None
    data = np.full((len(coders), len(items)), np.nan)
    for k, item in enumerate(items):
        for c, choice in item.items():
            data[coders.index(c), k] = ORDER[choice]

    def alpha(cols: np.ndarray) -> float | None:
        part = data[:, cols]
        if len(np.unique(part[~np.isnan(part)])) < 2:
            return None  # one value throughout: α is undefined
        return float(krippendorff.alpha(reliability_data=part, level_of_measurement="ordinal"))

    point = alpha(np.arange(len(items)))
    if point is None:
        return None, None, None
    rng = np.random.default_rng(seed)
    boot = [a for _ in range(resamples) if (a := alpha(rng.integers(0, len(items), len(items))))
            is not None]  # fmt: skip
    low, high = np.percentile(boot, [2.5, 97.5]) if boot else (None, None)
    return point, float(low), float(high)


def kappa_columns(pairs: list[tuple[str, str]], seed: int) -> dict:
    """The κ columns of a summary row from its (human, other) choices."""
    first, second = [h for h, _ in pairs], [o for _, o in pairs]
    kappa, low, high = cohen_kappa(first, second, seed=seed)
    weighted, _, _ = cohen_kappa(first, second, weighted=True)
    return {"kappa": kappa, "kappa_low": low, "kappa_high": high, "kappa_weighted": weighted}


FINDINGS_CSV = REPO_ROOT / "data" / "reference" / "saber_math_paper_findings.csv"
# our predictor -> the paper's name for it (``judge_agreement_with_humans``, by Δr bucket)
PAPER_NAMES = {
    "pairwise_judge": "pairwise_judge", "ordinal": "ordinal_ranking",
    "inter_annotator": "inter_annotator",
}  # fmt: skip


class AnnotationError(ValueError):
    pass


def read_annotations(path: str | Path) -> pl.DataFrame:
    """CSV or Parquet with columns query, a, b, choice, annotator; a malformed row is an error
    that names its line (nothing is dropped silently). ``human_study.read_human_file`` also
    reads a Label Studio export."""
    path = Path(path).expanduser()
    if not path.exists():
        raise AnnotationError(f"analyses.human_annotations: {path} does not exist")
    frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    missing = set(COLUMNS) - set(frame.columns)
    if missing:
        raise AnnotationError(f"{path}: missing column(s) {sorted(missing)}; need {COLUMNS}")
    cols = [*COLUMNS, *(c for c in OPTIONAL if c in frame.columns)]
    frame = frame.select(pl.col(c).cast(pl.String) for c in cols).with_row_index("line", 2)
    if "shown_first" in frame.columns:
        off = frame.filter(
            pl.col("shown_first").is_not_null()
            & (pl.col("shown_first") != pl.col("a"))
            & (pl.col("shown_first") != pl.col("b"))
        )
        if off.height:
            r = off.row(0, named=True)
            raise AnnotationError(
                f"{path}: line {r['line']}: shown_first {r['shown_first']!r} is neither a nor b"
            )
    bad = frame.filter(~pl.col("choice").is_in(CHOICES) | pl.col("choice").is_null())
    if bad.height:
        r = bad.row(0, named=True)
        raise AnnotationError(
            f"{path}: line {r['line']}: choice {r['choice']!r} is not one of {CHOICES} "
            f"({bad.height} such rows)"
        )
    same = frame.filter(pl.col("a") == pl.col("b"))
    if same.height:
        raise AnnotationError(f"{path}: line {same['line'][0]}: a and b are the same candidate")
    return frame.drop("line")


def shown_first(humans: pl.DataFrame) -> dict[tuple[str, str, str], str]:
    """(query, a, b) -> the candidate people saw first, where the labels record it (the first
    annotation of a pair that records one)."""
    if "shown_first" not in humans.columns:
        return {}
    rows = humans.filter(pl.col("shown_first").is_not_null())
    out: dict[tuple[str, str, str], str] = {}
    for q, a, b, f in rows.select("query", "a", "b", "shown_first").iter_rows():
        out.setdefault((q, a, b), f)
    return out


def judge_choices(
    judge,
    text: dict[str, str],
    pairs,
    shown: dict[tuple[str, str, str], str] | None = None,
    seed: int = 0,
) -> dict:
    """The pairwise judge once on each (query, a, b): first the candidate ``shown`` gives (as
    people saw it), else one drawn with a generator seeded by ``seed``; its pick is the choice,
    a failure no answer."""
    shown = shown or {}
    pairs = [p for p in pairs if all(x in text for x in p)]
    rng = np.random.default_rng([seed, 17])
    draws = rng.random(len(pairs))
    firsts = [shown.get(p, p[1] if u < 0.5 else p[2]) for p, u in zip(pairs, draws, strict=True)]
    items = [
        (text[q], text[f], text[b if f == a else a])
        for (q, a, b), f in zip(pairs, firsts, strict=True)
    ]
    out = judge.compare_batch(items)
    choices = {}
    for (q, a, b), f, o in zip(pairs, firsts, out, strict=True):
        if o.ok:
            winner = f if o.value == 1 else (b if f == a else a)
            choices[(q, a, b)] = "a" if winner == a else "b"
    return choices


def agreement(pred: str | None, human: str) -> float | None:
    if pred is None:
        return None
    if pred == human:
        return 1.0
    return 0.5 if "tie" in (pred, human) else 0.0


def ranking_choice(rating: dict[tuple[str, str], float], query: str, a: str, b: str):
    ra, rb = rating.get((query, a)), rating.get((query, b))
    if ra is None or rb is None:
        return None
    return "a" if ra > rb else "b" if rb > ra else "tie"


def rank_gap(ranks: dict[tuple[str, str], int], query: str, a: str, b: str) -> int | None:
    ra, rb = ranks.get((query, a)), ranks.get((query, b))
    return None if ra is None or rb is None else abs(ra - rb)


def rating_ranks(
    ratings: pl.DataFrame,
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], int]]:
    """(query, candidate) -> final rating, and -> rank within its query (0 = best; equal
    ratings ordered by candidate id)."""
    rating = {
        (q, c): r for q, c, r in ratings.select("query_id", "candidate_id", "rating").iter_rows()
    }
    ranked = ratings.sort(["query_id", "rating", "candidate_id"], descending=[False, True, False])
    ranks = {
        (q, c): k
        for q, c, k in ranked.with_columns(pl.int_range(pl.len()).over("query_id").alias("k"))
        .select("query_id", "candidate_id", "k")
        .iter_rows()
    }
    return rating, ranks


def human_agreement(
    humans: pl.DataFrame,
    predictions: dict[str, dict[tuple[str, str, str], str]],
    ratings: pl.DataFrame,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(per-annotation rows with each predictor's score and Δr; summary: predictor, bucket,
    annotations, agreement). ``predictions``: name -> {(query, a, b): choice}. The BT ranking
    is added as predictor "bt_ranking" from ``ratings`` (query_id, candidate_id, rating)."""
    rating, ranks = rating_ranks(ratings)
    names = [*predictions, "bt_ranking"]
    rows = []
    said: dict[str, list[str | None]] = {name: [] for name in names}  # each predictor's choices
    for q, a, b, choice, annotator in humans.select(COLUMNS).iter_rows():
        row = {"query": q, "a": a, "b": b, "choice": choice, "annotator": annotator}
        row["delta_r"] = rank_gap(ranks, q, a, b)
        for name in predictions:
            pred = predictions[name].get((q, a, b))
            row[name] = agreement(pred, choice)
            said[name].append(pred)
        said["bt_ranking"].append(ranking_choice(rating, q, a, b))
        row["bt_ranking"] = agreement(said["bt_ranking"][-1], choice)
        rows.append(row)
    schema = {
        "query": pl.String, "a": pl.String, "b": pl.String, "choice": pl.String,
        "annotator": pl.String, "delta_r": pl.Int64, **dict.fromkeys(names, pl.Float64),
    }  # fmt: skip
    scored = pl.DataFrame(rows, schema=schema)
    summary = []
    gaps, humans_said = scored["delta_r"].to_list(), scored["choice"].to_list()
    for bucket in BUCKETS:
        part = scored.filter(pl.col("delta_r") >= bucket)
        for n_name, name in enumerate(names):
            col = part[name].drop_nulls()
            pairs = [
                (h, p) for g, h, p in zip(gaps, humans_said, said[name], strict=True)
                if p is not None and g is not None and g >= bucket
            ]  # fmt: skip
            summary.append(
                {
                    "predictor": name,
                    "delta_r_at_least": bucket,
                    "annotations": col.len(),
                    "agreement": float(col.mean()) if col.len() else None,
                    **kappa_columns(pairs, seed=1000 * n_name + bucket),
                }
            )
    summary += inter_annotator(humans, ranks)
    paper = paper_agreement()
    for row in summary:
        name = PAPER_NAMES.get(row["predictor"], row["predictor"])
        if row["predictor"].startswith("majority_vote_"):
            name = "majority_judge"
        row["paper"] = paper.get((name, row["delta_r_at_least"]))
    return scored, pl.DataFrame(summary, schema=SUMMARY_SCHEMA)


def inter_annotator(humans: pl.DataFrame, ranks: dict[tuple[str, str], int]) -> list[dict]:
    """Mean agreement over every two annotators of the same pair (same scoring rule), overall
    and by the pair's rank distance (pairs without a rank count in Δr ≥ 0 only)."""
    scores: list[tuple[int | None, float, tuple[str, str]]] = []
    items: list[tuple[int | None, dict[str, str]]] = []  # per pair: {annotator: choice}
    for (q, a, b), frame in humans.sort("query", "a", "b").group_by(
        "query", "a", "b", maintain_order=True
    ):
        once = frame.unique("annotator", keep="first", maintain_order=True)
        choices = once["choice"].to_list()
        gap = rank_gap(ranks, q, a, b)
        scores += [(gap, agreement(x, y), (x, y)) for x, y in combinations(choices, 2)]
        items.append((gap, dict(zip(once["annotator"], choices, strict=True))))
    out = []
    for bucket in BUCKETS:
        got = [(s, p) for g, s, p in scores if bucket == 0 or (g is not None and g >= bucket)]
        out.append(
            {
                "predictor": "inter_annotator",
                "delta_r_at_least": bucket,
                "annotations": len(got),
                "agreement": sum(s for s, _ in got) / len(got) if got else None,
                **kappa_columns([p for _, p in got], seed=999_000 + bucket),
                **dict(
                    zip(
                        ("alpha", "alpha_low", "alpha_high"),
                        annotator_alpha(
                            [i for g, i in items if bucket == 0 or (g is not None and g >= bucket)],
                            seed=998_000 + bucket,
                        ),
                        strict=True,
                    )
                ),
            }
        )
    return out


def paper_agreement(path: Path = FINDINGS_CSV) -> dict[tuple[str, int], float]:
    """The paper's agreement with people (``judge_agreement_with_humans``), as shares:
    (its predictor name, Δr bucket) -> value; the BT ranking of the Swiss tournament as
    ``bt_ranking`` at Δr ≥ 0 (``ranking_vs_humans``)."""
    if not path.exists():
        return {}
    rows = pl.read_csv(path).filter(pl.col("unit") == "percent")
    out = {}
    for group, name, value in rows.select("finding", "variant", "value").iter_rows():
        if group == "judge_agreement_with_humans" and "_delta" in name:
            predictor, bucket = name.rsplit("_delta", 1)
            out[(predictor, int(bucket))] = float(value) / 100
        elif group == "ranking_vs_humans" and name == "swiss_tournament_20_rounds":
            out[("bt_ranking", 0)] = float(value) / 100
    return out


# ---- its section of the report


def read_human(summary: pl.DataFrame) -> str:
    if not summary.height:
        return "No human annotations configured (analyses.human_annotations)."
    _, parts = sections.agreement_parts(
        summary,
        "predictor",
        lambda r: f" (paper {sections.num(r['paper'])})" if r.get("paper") is not None else "",
    )
    return f"Agreement with the human annotators (1 / ½ / 0 rule): {parts}."


human_section = sections.table_section(
    "Agreement with people", read_human, "agreement by rank distance"
)
