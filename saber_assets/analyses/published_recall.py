"""How much of a published benchmark a rebuild's corpus holds: each published query and
document matched against the built corpus on the text, first exactly (the statement folded as
the contamination audit folds it: NFC, lower case, LaTeX spacing dropped, numbers as 0), then as
a MinHash near-duplicate (``contamination.matches.audit``, its streaming MinHash).

The published SaberMath-documents are the candidates of the 1,000 published queries, not the
paper's 283K corpus: a rebuild from the sources finds some of them, and this says how many, per
published domain and per corpus source, and which published queries the corpus holds (with the
corpus ids they matched), so that those queries can be taken as a query set.
"""

from __future__ import annotations

import polars as pl

from saber_assets.benchmark.data import Benchmark
from saber_assets.config import ContaminationConfig
from saber_assets.contamination.matches import audit, benchmark_items, overlap_summary

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
