"""Does the benchmark agree with MTEB? Leaderboard nDCG@10 against a user's table of MTEB
retrieval scores, matched by model name: Pearson and Spearman with confidence intervals (Fisher
z; for Spearman the Fieller–Hartley–Pearson variance 1.06/(n − 3)), for every matched model and
for a configured list of recent models, per leaderboard setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from saber_assets.leaderboard.board import score_column
from saber_assets.lib import sections
from saber_assets.lib.figures import pyplot

STATS_SCHEMA = {
    "setting": pl.String, "subset": pl.String, "n": pl.Int64, "pearson": pl.Float64,
    "pearson_low": pl.Float64, "pearson_high": pl.Float64, "spearman": pl.Float64,
    "spearman_low": pl.Float64, "spearman_high": pl.Float64,
}  # fmt: skip


class MtebError(ValueError):
    pass


def read_scores(path: str | Path) -> pl.DataFrame:
    """A CSV or Parquet file with columns ``model`` and ``score`` (one row per model)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise MtebError(f"analyses.mteb_scores: {path} does not exist")
    frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    missing = {"model", "score"} - set(frame.columns)
    if missing:
        raise MtebError(
            f"{path}: missing column(s) {sorted(missing)}; expected `model` and `score` "
            f"(found {frame.columns})"
        )
    frame = frame.select(pl.col("model").cast(pl.String), pl.col("score").cast(pl.Float64))
    dup = frame.filter(pl.col("model").is_duplicated())["model"].unique().to_list()
    if dup:
        raise MtebError(f"{path}: models listed twice: {sorted(dup)}")
    return frame


def fisher_ci(r: float, n: int, level: float = 0.95, var_factor: float = 1.0):
    """CI of a correlation through Fisher's z (``var_factor`` 1.06 for Spearman)."""
    from scipy import stats  # at use: scipy.stats is 1.7 s of every process's start

    if n <= 3 or not np.isfinite(r):
        return float("nan"), float("nan")
    z = np.arctanh(np.clip(r, -0.999999, 0.999999))
    half = stats.norm.ppf(0.5 + level / 2) * np.sqrt(var_factor / (n - 3))
    return float(np.tanh(z - half)), float(np.tanh(z + half))


def correlate(x: np.ndarray, y: np.ndarray) -> dict:
    from scipy import stats  # at use: scipy.stats is 1.7 s of every process's start

    n = len(x)
    if n < 3 or np.std(x) == 0 or np.std(y) == 0:
        nan = float("nan")
        return {"n": n, "pearson": nan, "pearson_ci": (nan, nan), "spearman": nan,
                "spearman_ci": (nan, nan)}  # fmt: skip
    p = float(stats.pearsonr(x, y).statistic)
    s = float(stats.spearmanr(x, y).statistic)
    return {
        "n": n,
        "pearson": p,
        "pearson_ci": fisher_ci(p, n),
        "spearman": s,
        "spearman_ci": fisher_ci(s, n, var_factor=1.06),
    }


def mteb_correlation(
    board: pl.DataFrame,
    scores: pl.DataFrame,
    model_names: dict[str, str] | None = None,
    recent: list[str] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(matched rows: setting, retriever, model, the board's nDCG@k, mteb; statistics per setting
    and subset "all" / "recent")."""
    names = model_names or {}
    metric = score_column(board)
    matched = (
        board.select("retriever", "setting", metric)
        .with_columns(
            pl.col("retriever").replace_strict(names, default=pl.col("retriever")).alias("model")
        )
        .join(scores.rename({"score": "mteb"}), on="model", how="inner")
        .sort("setting", "retriever")
    )
    rows = []
    for (setting,), frame in matched.group_by("setting", maintain_order=True):
        subsets = [("all", frame)]
        if recent:
            subsets.append(("recent", frame.filter(pl.col("model").is_in(recent))))
        for subset, part in subsets:
            c = correlate(part[metric].to_numpy(), part["mteb"].to_numpy())
            rows.append(
                {
                    "setting": setting,
                    "subset": subset,
                    "n": c["n"],
                    "pearson": c["pearson"],
                    "pearson_low": c["pearson_ci"][0],
                    "pearson_high": c["pearson_ci"][1],
                    "spearman": c["spearman"],
                    "spearman_low": c["spearman_ci"][0],
                    "spearman_high": c["spearman_ci"][1],
                }
            )
    return matched, pl.DataFrame(rows, schema=STATS_SCHEMA)


# ---- its section of the report


def mteb_figure(matched: pl.DataFrame):
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 4))
    metric = score_column(matched)
    for k, ((setting,), part) in enumerate(matched.group_by("setting", maintain_order=True)):
        ax.scatter(part["mteb"], part[metric], label=setting, color=f"C{k}")
        for m, x, y in part.select("model", "mteb", metric).iter_rows():
            ax.annotate(m, (x, y), fontsize=6)
    ax.set_xlabel("MTEB retrieval score")
    ax.set_ylabel(f"nDCG@{metric.split('@')[1]} on this benchmark")
    ax.legend(fontsize=7)
    return fig


def read_mteb(table: pl.DataFrame) -> str:
    if not table.height:
        return "No MTEB scores configured (analyses.mteb_scores)."
    parts = [
        f"{r['setting']} ({r['subset']} models, n={r['n']}): Pearson {sections.num(r['pearson'])}, "
        f"Spearman {sections.num(r['spearman'])}"
        for r in table.iter_rows(named=True)
    ]
    return f"Correlation of nDCG@10 with MTEB retrieval scores: {'; '.join(parts)}."


mteb_section = sections.table_section("MTEB correlation", read_mteb, "correlations with 95% CIs")
