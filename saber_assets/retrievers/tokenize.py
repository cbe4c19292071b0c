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
from functools import lru_cache

from saber_assets.retrievers.a0_search import quiet_c_output  # noqa: F401 - re-exported for the retrievers
from saber_resources.prompts import LATEX_SPAN

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
    """(prose with the formulas removed, the formulas)."""
    formulas = [next(g for g in m.groups() if g is not None) for m in LATEX_SPAN.finditer(text)]
    return LATEX_SPAN.sub(" ", text), [f.strip() for f in formulas if f.strip()]


def _walk(node, ancestors: tuple[str, ...], out: list[str]) -> None:
    _id, _, kind, symbol, _span, children = node
    if not children:
        path = (kind, *ancestors[:MAX_PATH])
        out.append("path:" + "/".join(path))
        out.append("sym:" + symbol)
        return
    for child in children:
        _walk(child, (kind, *ancestors), out)


@lru_cache(maxsize=200_000)
def formula_tokens(tex: str) -> tuple[str, ...]:
    """Leaf-root operator paths of a formula (pya0), or its plain words if it does not parse."""
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


def math_tokens(text: str) -> list[str]:
    prose, formulas = split_math(text)
    tokens = plain_tokens(prose)
    if formulas:
        with quiet_c_output():
            for f in formulas:
                tokens.extend(formula_tokens(f))
    return tokens


TOKENIZERS = {
    "math": math_tokens,
    "plain": plain_tokens,
    "whitespace": whitespace_tokens,
    "sklearn": sklearn_tokens,
}
