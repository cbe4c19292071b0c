"""Ontology titles as a person reads them (MathWorld's are CamelCase with glued small words)."""

from __future__ import annotations

import functools
import gzip
import json
import re
from pathlib import Path

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SMALL = ("and", "of", "in", "on", "the", "for", "with", "to")
# small words that rarely end an English word or a name: split off whatever precedes them
# ("Cundyand"); "in", "on" and "to" end many ("Division", "Chain"): split only after a known word
_SAFE = ("and", "of", "the", "for", "with")
_WORD = re.compile(r"[A-Z][a-z0-9]*")
BUNDLED_TREE = Path(__file__).resolve().parents[1] / "data" / "ontology" / "mathworld_tree.json.gz"


@functools.lru_cache(maxsize=1)
def known_words() -> frozenset[str]:
    """The capitalised words that end some bundled MathWorld title ('Division' in
    'LongDivision'): a word that ends a title is never a word with a small word glued to it."""
    titles: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("title"), str):
                titles.append(node["title"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    if BUNDLED_TREE.exists():
        walk(json.loads(gzip.decompress(BUNDLED_TREE.read_bytes())))
    return frozenset(words[-1] for t in titles if (words := _WORD.findall(t)))


def _peeled(word: str, known: frozenset[str]) -> list[str] | None:
    """``word`` as a known word followed by glued small words ('Calculusand' -> 'Calculus',
    'and'), or None where no such reading exists ('Division' is not 'Divisi on')."""
    if word in known:
        return [word]
    for small in _SMALL:
        if word.endswith(small) and len(word) > len(small):
            rest = word[: -len(small)]
            head = _peeled(rest, known)
            if head is None and small in _SAFE:
                head = [rest]
            if head is not None:
                return [*head, small]
    return None


def humanize_title(title: str, known: frozenset[str] | None = None) -> str:
    """MathWorld titles are CamelCase with glued small words: 'CalculusandAnalysis' ->
    'Calculus and Analysis'. A small word is split off only where what precedes it is a word
    that ends some title (``known_words``): 'DivisionProblems' stays 'Division Problems'."""
    known = known_words() if known is None else known
    parts = _CAMEL.sub(" ", title).split()
    out = []
    for part in parts:
        # a glued word is followed by a capital, so it ends a CamelCase part; a part's last one
        # may still stand alone (a title's last word is never glued to what follows)
        peeled = _peeled(part, known) if part[:1].isupper() and part not in known else None
        out.extend(peeled or [part])
    return " ".join(out)
