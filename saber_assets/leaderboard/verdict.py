"""verify's verdict: the numbers recomputed by kind, each difference with both values and its
tolerance, and what was not checked, by a name the reader may allow (``UNCHECKED``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# What verify may leave unchecked, each by a name: any of them fails the verdict unless the
# reader allows it by name (`saber verify --allow-unchecked NAME`). Nothing a bundle states can
# switch a check off: a missing part a category needs is a difference, not one of these.
UNCHECKED = {
    "judgments": "the grades: a bundle that names no judge ships no judgments to refit them from",
    "soft-grades": "grades fitted to the judge's probabilities (the efficient policy), which the "
    "exchange format does not carry",
    "choix-ties": "grades of a query with tied pairs under choix's prior (choix fits no ties)",
    "board": "the board, its tests and intervals: no leaderboard.parquet beside the bundle",
    # a retriever with runs and no row, named off the board by the board's settings (it left
    # the registry): shown in the verdict, not refused
    "off the board": "a retriever's runs with no row on the board",
    "choix-fill": "the full-corpus holes' grades under choix's prior (placed on choix's scale, "
    "which verify does not refit)",
    # said, not refused: the full-corpus runs are published to their top k, and these two read
    # deeper (the candidates' places in the whole ranking, the top 100)
    "full-corpus depth": "the board's condensed nDCG'@k and recall of the top five within 100 "
    "over the whole corpus: the full-corpus runs are published to their top k",
    "per-query": "the runs stage's per-query nDCG files (RETRIEVER/DOMAIN.parquet): a run "
    "given as TREC alone has none",
}


# the UNCHECKED names that are said, not refused: the reader sees them in the summary
SAID = frozenset({"off the board", "full-corpus depth"})


VERIFY_FLIPS = 10_000  # scipy's sign flips per pair (76 ms each at 100 queries)


# the most a pair near α is drawn with (the board's own cap; ten times it where the board
# claims a decision): ~8 s a pair at 100 queries per million
VERIFY_MAX_FLIPS = 1_000_000


EXACT = 1e-9  # numbers recomputed by the same arithmetic: equal to rounding


RATING_TOLERANCE = 1e-4  # a refit by another optimiser, on the [0, 5] scale


MAX_LISTED = 200  # differences kept in the verdict (all are counted)


@dataclass(frozen=True)
class Difference:
    """One published number that its files do not give: what, where, both values, the
    tolerance it was held to."""

    check: str
    where: str
    published: str
    recomputed: str
    tolerance: str = ""


@dataclass
class Verification:
    """The verdict: how many numbers of each kind were recomputed, what differs, and what could
    not be checked and why."""

    checked: dict[str, int] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)  # "NAME: why", NAME in UNCHECKED
    # the UNCHECKED names a reader accepts unchecked (`saber verify --allow-unchecked NAME`)
    allowed: frozenset[str] = frozenset()

    @property
    def unchecked(self) -> list[str]:
        """The names of what was not checked, each once, in order."""
        return list(dict.fromkeys(line.split(":", 1)[0] for line in self.not_checked))

    @property
    def refused(self) -> list[str]:
        """What was not checked and not allowed: each fails the verdict."""
        return [name for name in self.unchecked if name not in self.allowed | SAID]

    @property
    def passed(self) -> bool:
        return not self.differences and not self.refused

    def skip(self, name: str, why: str) -> None:
        """A check not made, by its ``UNCHECKED`` name: the verdict fails unless allowed."""
        if name not in UNCHECKED:
            raise ValueError(f"{name!r} is not one of the checks verify may leave out")
        self.not_checked.append(f"{name}: {why}")

    def count(self, kind: str, n: int = 1) -> None:
        self.checked[kind] = self.checked.get(kind, 0) + n

    def differ(self, check: str, where: str, published, recomputed, tolerance: str = "") -> None:
        self.differences.append(
            Difference(check, where, _shown(published), _shown(recomputed), tolerance)
        )

    def close(self, check: str, where: str, published, recomputed, tol: float) -> None:
        """Count a number; a difference where the two are not within ``tol`` (absolute), or one
        is missing or not finite where the other is."""
        self.count(check)
        if not numbers_agree(published, recomputed, tol):
            self.differ(check, where, published, recomputed, f"± {tol:g}")

    def same(self, check: str, where: str, published, recomputed) -> None:
        self.count(check)
        if published != recomputed:
            self.differ(check, where, published, recomputed, "equal")

    def summary(self) -> str:
        """One line: the verdict, the count of numbers checked and what was not checked."""
        total = sum(self.checked.values())
        unchecked = f"; not checked: {', '.join(self.unchecked)}" if self.unchecked else ""
        if self.passed:
            return (
                f"verified: {total:,} published numbers recomputed from the bundle, all agree"
                + unchecked
            )
        if not self.differences:
            return (
                f"NOT verified: {total:,} published numbers agree, but {', '.join(self.refused)} "
                "could not be checked (`saber verify --allow-unchecked NAME` accepts that)"
            )
        return (
            f"NOT verified: {len(self.differences):,} of {total:,} published numbers differ "
            f"from what the bundle gives (first: {self.differences[0].check} "
            f"{self.differences[0].where})"
        )

    def table(self, limit: int = 50) -> str:
        """The differences as a Markdown table (the first ``limit``)."""
        if not self.differences:
            return "no differences"
        lines = ["| check | where | published | recomputed | tolerance |", "|---|---|---|---|---|"]
        for d in self.differences[:limit]:
            cells = [d.check, d.where, d.published, d.recomputed, d.tolerance]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        if len(self.differences) > limit:
            lines.append(f"\n… and {len(self.differences) - limit:,} more")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """The verdict as the manifest and ``verification.json`` record it."""
        return {
            "passed": self.passed,
            "summary": self.summary(),
            "checked": dict(sorted(self.checked.items())),
            "differences": len(self.differences),
            "first_differences": [vars(d) for d in self.differences[:MAX_LISTED]],
            "not_checked": self.not_checked,
        }


def _shown(value) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def numbers_agree(a, b, tol: float) -> bool:
    """Both missing (None / NaN), or both finite and within ``tol``."""
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    if na or nb:
        return na and nb
    return abs(float(a) - float(b)) <= tol
