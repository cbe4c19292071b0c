"""Normalise and validate raw source rows into corpus rows."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from saber_assets.corpus.sources import RawRow, Rejected, storable

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


MAX_ID_CHARS = 200
# what an id may not hold: TREC run and qrels files are split on whitespace
_ID_BREAKERS = re.compile(r"[\s\x00-\x1f\x7f]")
_INTEGRAL = re.compile(r"^([+-]?\d+)\.0+$")


def canonical_id(value: Any) -> tuple[str | None, str | None]:
    """(id, error): one spelling per id, so ``1``, ``1.0`` and ``"1.0"`` are one problem (a source
    written by pandas turns integer ids into floats); refused when it would break a TREC file."""
    if value is None or isinstance(value, bool):
        return None, "missing" if value is None else "is a boolean, not an id"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None, f"is {value}, not an id"
        text = str(int(value)) if value.is_integer() else repr(value)
    elif isinstance(value, int | str):
        text = unicodedata.normalize("NFC", str(value)).strip()
    else:
        return None, f"is a {type(value).__name__}, not an id"
    text = _INTEGRAL.sub(r"\1", text)
    if not text:
        return None, "missing"
    if len(text) > MAX_ID_CHARS:
        return None, f"has {len(text):,} characters (cap {MAX_ID_CHARS})"
    if _ID_BREAKERS.search(text):
        return (
            None,
            f"{text[:60]!r} holds whitespace or a control character (it would break TREC files)",
        )
    return text, None


def _row_excerpt(record: dict) -> str:
    try:
        return storable(str(record)[:200])
    except Exception:  # a value nested too deep to print
        return "<unprintable>"


def _not_unicode(field: str, text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = ord(text[exc.start])
        return f"{field} holds a lone surrogate U+{char:04X} at character {exc.start:,}: not valid Unicode"
    return None


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
        try:
            result = _validate_row(row, mapping, max_problem_chars, max_solution_chars, first_seen)
        except Exception as exc:  # whatever a hostile row does, it is one quarantined row
            result = f"cannot be read: {type(exc).__name__}: {str(exc)[:120]}"
        if isinstance(result, CorpusRow):
            kept.append(result)
            first_seen[result.native_id] = row.line
        else:
            native_id = _id_or_none(row.record.get(mapping["id"]))
            native_id = None if native_id is None else storable(native_id)
            rejected.append(
                Rejected(row.source, row.line, native_id, result, _row_excerpt(row.record))
            )
    return kept, rejected


def _id_or_none(value: Any) -> str | None:
    try:
        return canonical_id(value)[0]
    except Exception:
        return None


def _validate_row(
    row: RawRow,
    mapping: dict[str, str],
    max_problem_chars: int,
    max_solution_chars: int,
    first_seen: dict[str, int],
) -> CorpusRow | str:
    """The row as a corpus row, or the reason it is quarantined."""
    rec = row.record
    native_id, id_error = canonical_id(rec.get(mapping["id"]))
    if id_error == "missing":
        return f"missing id field {mapping['id']!r}"
    if id_error:
        return f"id field {mapping['id']!r} {id_error}"
    problem, _, perr = _as_text(rec.get(mapping["problem"]))
    if perr:
        return f"problem field {mapping['problem']!r} {perr}"
    solution, n_solutions, serr = _as_text(rec.get(mapping["solution"]))
    if serr:
        return f"solution field {mapping['solution']!r} {serr}"
    problem, solution = normalize_text(problem), normalize_text(solution)
    if not problem:
        return "empty problem"
    if not solution:
        return "empty solution"
    if len(problem) > max_problem_chars:
        return f"problem has {len(problem):,} characters (cap {max_problem_chars:,})"
    if len(solution) > max_solution_chars:
        return f"solution has {len(solution):,} characters (cap {max_solution_chars:,})"
    category = rec.get(mapping["category"]) if "category" in mapping else None
    category = None if category is None else str(category)[:200]
    for field, text in (("id", native_id), ("problem", problem), ("solution", solution),
                        ("category", category or "")):  # fmt: skip
        if reason := _not_unicode(field, text):
            return reason
    if native_id in first_seen:
        return f"duplicate native id {native_id!r} (first seen at line {first_seen[native_id]})"
    return CorpusRow(
        id=f"{row.source}:{native_id}",
        source=row.source,
        native_id=native_id,
        line=row.line,
        problem=problem,
        solution=solution,
        n_solutions=n_solutions,
        category=category,
    )
