"""Each domain against its query quota, and why a domain falls short, in counts a person can act
on: the problems the domain has, those annotated well enough to join the pools, the viable
queries at the shared thresholds, and the queries the benchmark holds."""

from __future__ import annotations

import polars as pl

from saber_assets.signals.prepare import in_pool

COVERAGE_SCHEMA = {
    "domain": pl.String,
    "problems": pl.Int64,  # problems whose topics fall in the domain
    "annotated": pl.Int64,  # of them, those in the pools (topics and a core idea)
    "viable": pl.Int64,  # of those, queries viable at the final thresholds
    "queries": pl.Int64,  # the benchmark's queries of the domain
    "quota": pl.Int64,
    "status": pl.String,  # "at quota" or "below quota: <why>"
}


def domain_coverage(
    annotations: pl.DataFrame,
    thresholds: pl.DataFrame,
    queries: dict[str, int],
    quota: int,
    require_annotations: bool = True,
) -> pl.DataFrame:
    """One row per domain of ``thresholds`` (``relevance_thresholds``): its counts, down the
    funnel, and its status. ``queries``: the benchmark's queries per domain (those selected for
    it, as the candidates stage counts them)."""
    per_domain = (
        annotations.select(pl.col("domains"), in_pool(require_annotations).alias("in_pool"))
        .explode("domains")
        .drop_nulls("domains")
        .group_by("domains")
        .agg(pl.len().alias("problems"), pl.col("in_pool").sum().alias("annotated"))
    )
    counts = {r["domains"]: r for r in per_domain.iter_rows(named=True)}
    t = thresholds.row(0, named=True) if thresholds.height else {}
    cut = (
        f"topic > {t.get('topic_threshold', 0):.3f}, summary > {t.get('summary_threshold', 0):.3f}"
    )
    rows = []
    for r in thresholds.iter_rows(named=True):
        d = r["domain"]
        problems = int(counts.get(d, {}).get("problems", 0))
        annotated = int(counts.get(d, {}).get("annotated", 0))
        viable, n = int(r["viable_queries"] or 0), int(queries.get(d, 0))
        rows.append(
            {
                "domain": d,
                "problems": problems,
                "annotated": annotated,
                "viable": viable,
                "queries": n,
                "quota": quota,
                "status": "at quota"
                if n >= quota
                else "below quota: " + shortfall(problems, annotated, viable, quota, cut),
            }  # fmt: skip
        )
    return pl.DataFrame(rows, schema=COVERAGE_SCHEMA)


def shortfall(problems: int, annotated: int, viable: int, quota: int, cut: str) -> str:
    """Why a domain has fewer queries than its quota: the first narrowing of the funnel that
    leaves fewer than the quota."""
    if problems < quota:
        return f"the corpus has only {problems} problems in this domain"
    if annotated < quota:
        return (
            f"only {annotated} of its {problems} problems have topics and a core idea "
            "(the others are left out of the pools)"
        )
    return (
        f"only {viable} of its {annotated} annotated problems are viable queries at the shared "
        f"thresholds ({cut}): too few candidates in one of the three groups"
    )


def below_quota(coverage: pl.DataFrame) -> pl.DataFrame:
    return coverage.filter(pl.col("queries") < pl.col("quota"))


def coverage_lines(coverage: pl.DataFrame) -> list[str]:
    """The console's view: one line per domain, the reason after a short one."""
    width = max((len(d) for d in coverage["domain"]), default=0)
    lines = []
    for r in coverage.iter_rows(named=True):
        mark = "ok" if r["queries"] >= r["quota"] else "SHORT"
        lines.append(
            f"{r['domain']:<{width}}  {r['queries']:>4}/{r['quota']} queries  {mark:<5}  "
            f"({r['problems']:,} problems, {r['annotated']:,} annotated, {r['viable']:,} viable)"
        )
        if mark == "SHORT":
            lines.append(f"{'':<{width}}  {r['status']}")
    return lines
