r"""Formulas (and figures) in a text, found in time linear in its length: the one scanner every
tokenizer, summarizer, the Approach Zero query builder and the explorer use.

A scanner is an ordered list of delimiters. It finds what the regular expression
``open_1 (.{min,}?) close_1 | open_2 (.{min,}?) close_2 | …`` (DOTALL) finds with ``finditer``:
at each position the first delimiter that opens there and closes later wins, its body is the
shortest one of at least ``min_body`` characters, and the next search starts where it ended.
The regular expression takes time quadratic in the length on unclosed openings (48,000
characters of ``\(`` took 14 s: every opening scans to the end), so the scanner remembers, for
each kind of closing, the last "first closing at or after p" it searched for: the positions a
left-to-right scan asks grow, so each stretch is searched about once. A closing whose name must
repeat the opening's (``\begin{X}…\end{X}``) is indexed whole instead, every position grouped
by name in one pass, since distinct unclosed names would each search to the end.

``steps`` counts the characters the scanner's searches cover and the lookups it makes, so a
test can bound the work by the length without timing anything.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# the first match of a pattern at or after a position, (start, end), from the scan's index of it:
# ``first(pattern, at)``, or ``first(pattern, at, key, same)`` for a keyed closing
First = Callable[..., "tuple[int, int] | None"]


@dataclass(frozen=True)
class Delimiter:
    """One kind of span: ``opening`` is matched where a span may start; ``closing`` is every
    closing of this kind; with ``same``, a closing ends the span only when its group ``same``
    equals the opening's (an environment's name). A closing that is more than one pattern is a
    function ``(text, opening match, first) -> (body end, span end) | None`` that finds its
    parts through ``first`` alone (so it stays linear)."""

    name: str
    opening: re.Pattern
    closing: re.Pattern | Callable[[str, re.Match, First], tuple[int, int] | None]
    same: str | None = None
    min_body: int = 1


@dataclass(frozen=True)
class Span:
    """One span: where it lies, its delimiter's name, its body, the opening's groups."""

    start: int
    end: int
    whole: str
    kind: str
    body: str
    opened: dict[str, str | None] = field(default_factory=dict)


class Closings:
    """Every position one closing pattern matches at in one text, found in one pass, keyed by
    the ``same`` group when there is one."""

    def __init__(self, text: str, pattern: re.Pattern, same: str | None, count: list[int]) -> None:
        self.starts: dict[str | None, list[int]] = {}
        self.ends: dict[str | None, list[int]] = {}
        pos = 0
        while (m := pattern.search(text, pos)) is not None:
            key = m.group(same) if same else None
            self.starts.setdefault(key, []).append(m.start())
            self.ends.setdefault(key, []).append(m.end())
            count[0] += m.end() - pos + 1
            pos = m.start() + 1  # closings may overlap ("$$$" closes "$$" at 0 and at 1)
        count[0] += len(text) - pos

    def first(self, key: str | None, at: int, count: list[int]) -> tuple[int, int] | None:
        starts = self.starts.get(key)
        count[0] += 1
        if not starts:
            return None
        n = bisect_left(starts, at)
        return (starts[n], self.ends[key][n]) if n < len(starts) else None


class NextClosing:
    """The first match of one pattern at or after a position, searched when asked: the last
    answer is kept, and a left-to-right scan asks positions that grow, so each stretch of the
    text is searched about once (the keyless closings: cheaper than ``Closings``' full index on
    an ordinary text, where the first closing is near)."""

    def __init__(self, text: str, pattern: re.Pattern) -> None:
        self.text, self.pattern = text, pattern
        self.searched = -1  # where the last search started; -1: none yet
        self.found: tuple[int, int] | None = None  # what it found

    def first(self, key: None, at: int, count: list[int]) -> tuple[int, int] | None:
        count[0] += 1
        if 0 <= self.searched <= at and (self.found is None or at <= self.found[0]):
            return self.found  # nothing in [searched, found) and at lies in it
        m = self.pattern.search(self.text, at)
        count[0] += (m.end() if m else len(self.text)) - at
        self.searched, self.found = at, (m.start(), m.end()) if m else None
        return self.found


class SpanScanner:
    """The spans of ``delimiters`` in a text, left to right (module docstring)."""

    def __init__(self, delimiters: list[Delimiter] | tuple[Delimiter, ...]) -> None:
        self.delimiters = tuple(delimiters)
        self.any_opening = re.compile(
            "|".join(f"(?:{d.opening.pattern})" for d in self.delimiters),
            self.delimiters[0].opening.flags,
        )
        self.steps = 0  # of the last scan (module docstring)

    def finditer(self, text: str) -> Iterator[Span]:
        count = [0]
        found: dict[tuple[re.Pattern, str | None], Closings | NextClosing] = {}

        def first(
            pattern: re.Pattern, at: int, key: str | None = None, same: str | None = None
        ) -> tuple[int, int] | None:
            if (pattern, same) not in found:
                # a keyed closing is indexed whole: distinct unclosed names would each search on
                found[pattern, same] = (
                    Closings(text, pattern, same, count) if same else NextClosing(text, pattern)
                )
            return found[pattern, same].first(key, at, count)

        pos = 0
        try:
            while (opened := self.any_opening.search(text, pos)) is not None:
                p = opened.start()
                count[0] += p - pos + 1
                for d in self.delimiters:
                    o = d.opening.match(text, p)
                    if o is None:
                        continue
                    count[0] += o.end() - p + 1
                    if callable(d.closing):
                        c = d.closing(text, o, first)
                    else:
                        key = o.group(d.same) if d.same else None
                        c = first(d.closing, o.end() + d.min_body, key, d.same)
                    if c is None:
                        continue
                    yield Span(p, c[1], text[p : c[1]], d.name, text[o.end() : c[0]], o.groupdict())
                    pos = c[1]
                    break
                else:
                    pos = p + 1
        finally:
            self.steps = count[0]

    def sub(self, repl: str | Callable[[Span], str], text: str) -> str:
        """``text`` with every span replaced by ``repl`` (or what it returns for the span)."""
        pieces, at = [], 0
        for s in self.finditer(text):
            pieces += [text[at : s.start], repl if isinstance(repl, str) else repl(s)]
            at = s.end
        if not pieces:
            return text
        pieces.append(text[at:])
        return "".join(pieces)


def delimiter(name: str, opening: str, closing: str, same: str | None = None, min_body: int = 1):
    """A ``Delimiter`` from two patterns (DOTALL is irrelevant: neither holds a dot)."""
    return Delimiter(name, re.compile(opening), re.compile(closing), same, min_body)


def dollars_and_brackets(min_body: int = 1) -> list[Delimiter]:
    r"""``$$…$$``, ``$…$``, ``\[…\]``, ``\(…\)``, in the order a regex's alternatives try them."""
    return [
        delimiter("dd", r"\$\$", r"\$\$", min_body=min_body),
        delimiter("d", r"\$", r"\$", min_body=min_body),
        delimiter("db", r"\\\[", r"\\\]", min_body=min_body),
        delimiter("ib", r"\\\(", r"\\\)", min_body=min_body),
    ]


# $$…$$, $…$, \[…\] or \(…\), each at least one character: the formulas of the retrievers'
# tokenisers, the translation prompt and the dense encoders' structure vectors
LATEX_SPANS = SpanScanner(dollars_and_brackets())
