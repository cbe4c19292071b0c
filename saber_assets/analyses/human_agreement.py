"""Agreement with people: human pairwise annotations (query, a, b, choice ∈ {a, b, tie},
annotator) against the pairwise judge and the Bradley–Terry ranking. A prediction scores 1 when
it equals the human's choice, 0.5 when exactly one of the two is a tie, 0 otherwise; reported
overall and by the pair's distance in the final ranking (Δr ≥ 0, 25, 50), with the agreement
between annotators where a pair has two or more."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import polars as pl

CHOICES = ("a", "b", "tie")
BUCKETS = (0, 25, 50)
COLUMNS = ("query", "a", "b", "choice", "annotator")


SUMMARY_SCHEMA = {
    "predictor": pl.String, "delta_r_at_least": pl.Int64, "annotations": pl.Int64,
    "agreement": pl.Float64,
}  # fmt: skip


class AnnotationError(ValueError):
    pass


def read_annotations(path: str | Path) -> pl.DataFrame:
    """CSV or Parquet with columns query, a, b, choice, annotator; a malformed row is an error
    that names its line (nothing is dropped silently)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise AnnotationError(f"analyses.human_annotations: {path} does not exist")
    frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    missing = set(COLUMNS) - set(frame.columns)
    if missing:
        raise AnnotationError(f"{path}: missing column(s) {sorted(missing)}; need {COLUMNS}")
    frame = frame.select(pl.col(c).cast(pl.String) for c in COLUMNS).with_row_index("line", 2)
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
    for q, a, b, choice, annotator in humans.select(COLUMNS).iter_rows():
        row = {"query": q, "a": a, "b": b, "choice": choice, "annotator": annotator}
        row["delta_r"] = rank_gap(ranks, q, a, b)
        for name in predictions:
            pred = predictions[name].get((q, a, b))
            row[name] = agreement(pred, choice)
        row["bt_ranking"] = agreement(ranking_choice(rating, q, a, b), choice)
        rows.append(row)
    schema = {
        "query": pl.String, "a": pl.String, "b": pl.String, "choice": pl.String,
        "annotator": pl.String, "delta_r": pl.Int64, **dict.fromkeys(names, pl.Float64),
    }  # fmt: skip
    scored = pl.DataFrame(rows, schema=schema)
    summary = []
    for bucket in BUCKETS:
        part = scored.filter(pl.col("delta_r") >= bucket)
        for name in names:
            col = part[name].drop_nulls()
            summary.append(
                {
                    "predictor": name,
                    "delta_r_at_least": bucket,
                    "annotations": col.len(),
                    "agreement": float(col.mean()) if col.len() else None,
                }
            )
    summary += inter_annotator(humans)
    return scored, pl.DataFrame(summary, schema=SUMMARY_SCHEMA)


def inter_annotator(humans: pl.DataFrame) -> list[dict]:
    """Mean agreement over every two annotators of the same pair (same scoring rule)."""
    scores = []
    for _, frame in humans.group_by("query", "a", "b"):
        choices = frame.unique("annotator", keep="first")["choice"].to_list()
        scores += [agreement(x, y) for x, y in combinations(choices, 2)]
    return [
        {
            "predictor": "inter_annotator",
            "delta_r_at_least": 0,
            "annotations": len(scores),
            "agreement": sum(scores) / len(scores) if scores else None,
        }
    ]
