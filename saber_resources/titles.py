"""Ontology titles as a person reads them (MathWorld's are CamelCase with glued small words)."""

from __future__ import annotations

import re

_GLUED = re.compile(r"(?<=[a-z])(and|of|in|on|the|for|with|to)(?=[A-Z])")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def humanize_title(title: str) -> str:
    """MathWorld titles are CamelCase with glued small words: 'CalculusandAnalysis' -> 'Calculus and Analysis'."""
    s = _GLUED.sub(r" \1 ", title)
    s = _CAMEL.sub(" ", s)
    return " ".join(s.split())
