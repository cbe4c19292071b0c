"""The board's columns: the one place their names are made.

The scorer writes a board under these names (``evaluate.score_table``); everything that reads one
(the markdown board, the report, the explorer's data file, ``saber verify``, the CLI) asks here
for a name rather than spelling it, and the explorer's script reads the per-domain names from its
data file (``for_page``). A test plants a spelled-out name elsewhere and goes red
(``tests/test_graph.py``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

SETTING = "setting"
RETRIEVER = "retriever"
QUERIES = "queries"  # the queries a row's overall mean is over
FAILED = "failed"  # queries the retriever could not score (nDCG 0 in the means)
SKIPPED = "skipped"  # queries it left out by its own rule (out of the means)
CI_LOW, CI_HIGH = "ci_low", "ci_high"  # the overall mean's bootstrap interval

_METRIC = re.compile(r"ndcg@\d+")


def metric_column(k: int) -> str:
    """The score column for the cut-off k (``leaderboard.k``): nDCG@k."""
    return f"ndcg@{k}"


def score_column(table) -> str:
    """The nDCG@k column of a leaderboard or report table, whatever its k."""
    names = [c for c in table.columns if _METRIC.fullmatch(c)]
    if len(names) != 1:
        raise ValueError(f"expected one nDCG@k column, found {names or 'none'} in {table.columns}")
    return names[0]


def domain_mean(domain: str) -> str:
    """A domain's mean nDCG: the column is the domain's name."""
    return domain


def domain_ci(domain: str) -> str:
    """A domain's bootstrap interval, as text ``[low, high]``."""
    return f"{domain} ci"


def domain_queries(domain: str) -> str:
    """The queries a domain's cell averages."""
    return f"{domain} queries"


def board_domains(table) -> list[str]:
    """The domains a board carries, in its column order (a domain has a mean and an interval)."""
    columns = set(table.columns)
    return [c for c in table.columns if domain_ci(c) in columns]


def for_page(domains: Sequence[str]) -> dict[str, dict[str, str]]:
    """The per-domain column names, for a page's script to read rows by (the explorer's data)."""
    return {
        "domain_mean": {d: domain_mean(d) for d in domains},
        "domain_ci": {d: domain_ci(d) for d in domains},
        "domain_queries": {d: domain_queries(d) for d in domains},
    }
