"""Normalise and validate raw source rows into corpus rows."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from saber_assets.corpus.sources import RawRow, Rejected

_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_TRAILING = re.compile(r" +\n")
_BLANKS = re.compile(r"\n{3,}")


def normalize_text(text: str) -> str:
    """NFC, unified newlines, runs of spaces folded, at most one blank line, stripped."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _SPACES.sub(" ", text)
    text = _TRAILING.sub("\n", text)
    text = _BLANKS.sub("\n\n", text)
    return text.strip()


@dataclass
class CorpusRow:
    id: str
    source: str
    native_id: str
    line: int
    problem: str
    solution: str
    n_solutions: int
    category: str | None


def _as_text(value: Any) -> tuple[str | None, int, str | None]:
    """(text, count, error): lists keep their first non-empty entry (the first official solution)."""
    if value is None:
        return None, 0, "missing"
    if isinstance(value, list):
        if any(not isinstance(v, str) for v in value):
            return None, len(value), "is a list with non-text entries"
        texts = [v for v in value if v.strip()]
        if not texts:
            return None, len(value), "is a list with no non-empty entry"
        return texts[0], len(value), None
    if isinstance(value, str):
        return value, 1, None
    return None, 0, f"is a {type(value).__name__}, not text"


def validate_rows(
    rows: list[RawRow],
    mapping: dict[str, str],
    max_problem_chars: int,
    max_solution_chars: int,
) -> tuple[list[CorpusRow], list[Rejected]]:
    kept: list[CorpusRow] = []
    rejected: list[Rejected] = []
    first_seen: dict[str, int] = {}
    for row in rows:
        rec = row.record
        raw_id = rec.get(mapping["id"])
        native_id = None if raw_id is None else str(raw_id).strip()

        def reject(reason: str, _row: RawRow = row, _nid: str | None = native_id) -> None:
            rejected.append(Rejected(_row.source, _row.line, _nid, reason, str(_row.record)[:200]))

        if not native_id:
            reject(f"missing id field {mapping['id']!r}")
            continue
        problem, _, perr = _as_text(rec.get(mapping["problem"]))
        if perr:
            reject(f"problem field {mapping['problem']!r} {perr}")
            continue
        solution, n_solutions, serr = _as_text(rec.get(mapping["solution"]))
        if serr:
            reject(f"solution field {mapping['solution']!r} {serr}")
            continue
        problem, solution = normalize_text(problem), normalize_text(solution)
        if not problem:
            reject("empty problem")
            continue
        if not solution:
            reject("empty solution")
            continue
        if len(problem) > max_problem_chars:
            reject(f"problem has {len(problem):,} characters (cap {max_problem_chars:,})")
            continue
        if len(solution) > max_solution_chars:
            reject(f"solution has {len(solution):,} characters (cap {max_solution_chars:,})")
            continue
        if native_id in first_seen:
            reject(
                f"duplicate native id {native_id!r} (first seen at line {first_seen[native_id]})"
            )
            continue
        first_seen[native_id] = row.line
        category = rec.get(mapping["category"]) if "category" in mapping else None
        kept.append(
            CorpusRow(
                id=f"{row.source}:{native_id}",
                source=row.source,
                native_id=native_id,
                line=row.line,
                problem=problem,
                solution=solution,
                n_solutions=n_solutions,
                category=None if category is None else str(category),
            )
        )
    return kept, rejected
