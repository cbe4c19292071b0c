r"""Tokenisers for the lexical baselines.

math-aware: LaTeX spans become Approach Zero (pya0) operator-tree leaf-root path tokens plus the
leaf symbols kept apart (renamed variables still share their paths); prose becomes lowercase
words. plain (the paper's "-no-tok" variants): lowercase words of the whole text, LaTeX included.
whitespace: the reference code's lexical baselines (``text.lower().split()``: punctuation and
LaTeX stay glued to their words). sklearn: scikit-learn's default analyzer (lower-cased
``(?u)\b\w\w+\b``: one-character tokens dropped), what the reference's TF-IDF used.
"""

from __future__ import annotations

import re

from saber_assets.retrievers.a0_search import quiet_c_output  # noqa: F401 - re-exported for the retrievers
from saber_resources.math_spans import LATEX_SPANS

_WORD = re.compile(r"[a-z0-9]+")
_SKLEARN = re.compile(r"(?u)\b\w\w+\b")  # TfidfVectorizer's default token_pattern
MAX_PATH = 4  # operators above the leaf kept in a path token


def plain_tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def whitespace_tokens(text: str) -> list[str]:
    return text.lower().split()


def sklearn_tokens(text: str) -> list[str]:
    return _SKLEARN.findall(text.lower())


def split_math(text: str) -> tuple[str, list[str]]:
    """(prose with each formula replaced by a space, the formulas), in one linear pass
    (``math_spans.LATEX_SPANS``)."""
    pieces: list[str] = []
    formulas: list[str] = []
    at = 0
    for m in LATEX_SPANS.finditer(text):
        pieces.append(text[at : m.start])
        at = m.end
        if f := m.body.strip():
            formulas.append(f)
    if not pieces:
        return text, formulas
    pieces.append(text[at:])
    return " ".join(pieces), formulas


def _walk(node, ancestors: tuple[str, ...], out: list[str]) -> None:
    _id, _, kind, symbol, _span, children = node
    if not children:
        path = (kind, *ancestors[:MAX_PATH])
        out.append("path:" + "/".join(path))
        out.append("sym:" + symbol)
        return
    for child in children:
        _walk(child, (kind, *ancestors), out)


_FORMULAS: dict[str, tuple[str, ...]] = {}  # formula -> its tokens, parsed once per process
_FORMULAS_KEPT = 200_000


def _parse_formula(tex: str) -> tuple[str, ...]:
    import pya0

    try:
        res = pya0.parse(tex, insert_rank_node=False)
    except Exception:
        res = None
    if not res or res[0] != "OK" or res[1] is None:
        return tuple("tex:" + t for t in plain_tokens(tex))
    out: list[str] = []
    _walk(res[1], (), out)
    return tuple(out)


def _parsed(formulas: list[str]) -> list[tuple[str, ...]]:
    """The formulas' tokens, parsing (with the parser's C output silenced: a handful of system
    calls, once per document before, when nearly every formula was already parsed) only the
    ones this process has not seen."""
    new = [f for f in formulas if f not in _FORMULAS]
    if new:
        if len(_FORMULAS) + len(new) > _FORMULAS_KEPT:
            _FORMULAS.clear()
        with quiet_c_output():
            for f in new:
                _FORMULAS[f] = _parse_formula(f)
    return [_FORMULAS[f] for f in formulas]


def formula_tokens(tex: str) -> tuple[str, ...]:
    """Leaf-root operator paths of a formula (pya0), or its plain words if it does not parse."""
    return _parsed([tex])[0]


def math_tokens(text: str) -> list[str]:
    prose, formulas = split_math(text)
    tokens = plain_tokens(prose)
    for parsed in _parsed(formulas) if formulas else ():
        tokens.extend(parsed)
    return tokens


TOKENIZERS = {
    "math": math_tokens,
    "plain": plain_tokens,
    "whitespace": whitespace_tokens,
    "sklearn": sklearn_tokens,
}
