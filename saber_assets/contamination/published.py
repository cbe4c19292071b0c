"""How much of a published benchmark a rebuild's corpus holds: each published query and
document matched against the built corpus on the text, first exactly (the statement folded as
the contamination audit folds it: NFC, lower case, LaTeX spacing dropped, numbers as 0), then as
a MinHash near-duplicate (``contamination.matches.audit``, its streaming MinHash).

The published SaberMath-documents are the candidates of the 1,000 published queries, not the
paper's 283K corpus: a rebuild from the sources finds some of them, and this says how many, per
published domain and per corpus source, and which published queries the corpus holds (with the
corpus ids they matched), so that those queries can be taken as a query set
(``candidates.published_queries``) and the rebuild's grades compared with the published ones,
query by query (``grade_agreement``).
"""

from __future__ import annotations

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.config import ContaminationConfig
from saber_assets.contamination.matches import audit, benchmark_items, overlap_summary
from saber_assets.lib.correlation import kendall_tau_b

# the output's: overlap_summary's columns
RECALL_SCHEMA = {"role": pl.String, "domain": pl.String, "items": pl.UInt32,
                 "overlapping": pl.Int64, "share": pl.Float64}  # fmt: skip
FOUND_SCHEMA = {"item": pl.String, "role": pl.String, "corpus_id": pl.String, "how": pl.String}


def published_recall(
    published: Benchmark, corpus: pl.DataFrame, config: ContaminationConfig | None = None
) -> dict[str, pl.DataFrame]:
    """Tables of what the corpus (``id``, ``problem``) holds of ``published``:

    - ``summary``: per role (query, candidate) and published domain (and ``all``): items,
      matched, share (``overlap_summary``);
    - ``found``: each published item the corpus holds, once, with the corpus row it matched
      (exact before near, then the smallest id) and how;
    - ``by_source``: per role and corpus source, the published items found there and their
      share of the role's items;
    - ``queries``: the published queries found, with their corpus ids."""
    items, roles = benchmark_items(published)
    rows = corpus.select("id", "problem").iter_rows()
    matches, _ = audit(items, rows, config)
    item_roles = roles.select("item", "role").unique()
    found = (
        matches.rename({"training_id": "corpus_id"})
        .with_columns((pl.col("how") != "exact").alias("_near"))
        .sort("item", "_near", "corpus_id")
        .unique("item", keep="first")
        .drop("_near")
        .join(item_roles, on="item")
        .select(list(FOUND_SCHEMA))
        .sort("role", "item")
    )
    totals = item_roles.group_by("role").len("items")
    by_source = (
        found.with_columns(pl.col("corpus_id").str.split(":").list.first().alias("source"))
        .group_by("role", "source")
        .len("found")
        .join(totals, on="role")
        .with_columns((pl.col("found") / pl.col("items")).alias("share"))
        .sort("role", "source")
    )
    queries = found.filter(pl.col("role") == "query").select(
        pl.col("item").alias("query_id"), "corpus_id", "how"
    )
    return {
        "summary": overlap_summary(matches, roles),
        "found": found,
        "by_source": by_source,
        "queries": queries,
    }


# grade_agreement's output: one row per published query
AGREEMENT_SCHEMA = {
    "query": pl.String, "corpus_id": pl.String, "published_candidates": pl.Int64,
    "found_in_corpus": pl.Int64, "in_rebuilt_pool": pl.Int64, "pool_share": pl.Float64,
    "kendall_tau": pl.Float64,
}  # fmt: skip


def published_grades(published: Benchmark) -> pl.DataFrame:
    """(query, document, grade): each published query's candidates with their published grade."""
    docs = published.documents.select(pl.col("id").alias("document")).with_row_index("row")
    return (
        published.queries.select(pl.col("id").alias("query"), "candidates", "relevance_scores")
        .explode("candidates", "relevance_scores")
        .join(docs, left_on="candidates", right_on="row")
        .select("query", "document", pl.col("relevance_scores").cast(pl.Float64).alias("grade"))
    )


def grade_agreement(
    published: Benchmark, found: pl.DataFrame, ratings: pl.DataFrame
) -> pl.DataFrame:
    """Query by query, how a rebuild's grades compare with the published ones, for each
    published query the corpus holds (``found``: ``published_recall``'s, item -> corpus_id):

    - ``found_in_corpus``: its published candidates the corpus holds;
    - ``in_rebuilt_pool``: those among the rebuild's own candidates of that query
      (``ratings``: query_id, candidate_id, rating), and their share of the published ones;
    - ``kendall_tau``: Kendall's τ-b between the published grades and the rebuild's ratings over
      the candidates both hold (null below two, or where either side is constant)."""
    corpus_of = dict(found.select("item", "corpus_id").unique("item").iter_rows())
    rated = {
        (q, c): r for q, c, r in ratings.select("query_id", "candidate_id", "rating").iter_rows()
    }
    rows = []
    grades = published_grades(published)
    for (query,), part in grades.sort("query").group_by("query", maintain_order=True):
        if query not in corpus_of:
            continue
        qid = corpus_of[query]
        held = [(corpus_of[d], g) for d, g in part.select("document", "grade").iter_rows()
                if d in corpus_of]  # fmt: skip
        both = [(g, rated[(qid, c)]) for c, g in held if (qid, c) in rated]
        tau = kendall_tau_b([g for g, _ in both], [r for _, r in both])
        rows.append(
            {"query": query, "corpus_id": qid, "published_candidates": part.height,
             "found_in_corpus": len(held), "in_rebuilt_pool": len(both),
             "pool_share": len(both) / part.height, "kendall_tau": tau}
        )  # fmt: skip
    return pl.DataFrame(rows, schema=AGREEMENT_SCHEMA)


def agreement_reading(table: pl.DataFrame) -> str:
    """The agreement in one sentence, every number from ``table``."""
    if table.is_empty():
        return "No published query is in the corpus: nothing to compare."
    rebuilt = table.filter(pl.col("in_rebuilt_pool") > 0)
    taus = table["kendall_tau"].drop_nulls()
    tau = (
        f"a mean Kendall τ of {taus.mean():.3f} (median {taus.median():.3f}) over the "
        f"{taus.len()} queries with two or more graded candidates in common"
        if taus.len()
        else "no query with two graded candidates in common"
    )
    return (
        f"{table.height} published queries are in the corpus; {rebuilt.height} were rebuilt as "
        f"queries. The rebuild's pools hold {table['pool_share'].mean():.1%} of their published "
        f"candidates on average, and its grades agree with the published ones at {tau}."
    )
