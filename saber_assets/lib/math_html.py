"""Problems and solutions as HTML people can read: LaTeX converted to MathML ahead of time
(latex2mathml), so the page draws its formulas with the browser's own MathML support and fetches
nothing. A formula that does not convert stays as its source, marked, never dropped."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

import latex2mathml.converter

from saber_resources.math_spans import SpanScanner, delimiter

# $$…$$ and \[…\] and the display environments MATH writes without dollars, $…$ and \(…\), and
# Asymptote figures ([asy]…[/asy]: code, not LaTeX). A backslash-escaped dollar is a price.
# At a position the first kind that opens and closes wins, each formula holds at least one
# character, and it ends at its first closing (an environment at its own name's end).
ENVIRONMENTS = "align|equation|gather|eqnarray|multline"
SCANNER = SpanScanner(
    [
        delimiter("dd", r"(?<!\\)\$\$", r"(?<!\\)\$\$"),
        delimiter("db", r"\\\[", r"\\\]"),
        delimiter(
            "de",
            rf"\\begin\{{(?P<name>(?P<env>{ENVIRONMENTS})(?P<star>\*?))\}}",
            rf"\\end\{{(?P<name>(?:{ENVIRONMENTS})\*?)\}}",
            same="name",
        ),
        delimiter("i", r"(?<!\\)\$", r"(?<!\\)\$"),
        delimiter("ib", r"\\\(", r"\\\)"),
        delimiter("asy", r"\[asy\]", r"\[/asy\]"),
    ]
)


@dataclass
class Span:
    """One formula or figure in a text: where it lies and its parts (``groupdict``: the group of
    its kind holds its content, ``env`` and ``star`` an environment's name, others None)."""

    start: int
    end: int
    whole: str
    groups: dict[str, str | None]


def spans(text: str) -> Iterator[Span]:
    """The formulas and figures of ``text``, left to right, in time linear in its length
    (``saber_resources.math_spans``)."""
    for s in SCANNER.finditer(text):
        groups = dict.fromkeys(("dd", "db", "env", "star", "de", "i", "ib", "asy"))
        groups[s.kind] = s.body
        if s.kind == "de":
            groups["env"], groups["star"] = s.opened["env"], s.opened["star"]
        yield Span(s.start, s.end, s.whole, groups)


# latex2mathml writes a command it does not know as a literal identifier: <mi>\foo</mi>
UNKNOWN = re.compile(r"<m[io]>\\([A-Za-z]+)</m[io]>")
# operator names LaTeX defines and latex2mathml 3.81 does not: written as \operatorname{...}
OPERATORS = re.compile(r"\\(arg|hom|ker|Pr|deg|dim)(?![A-Za-z])")
# amsmath's environments inside a formula that latex2mathml 3.81 writes as a row with a literal
# `&` (a system of equations in $$…$$ read as one line): written as the ones it lays out as a
# table, the same alignment (aligned: right then left columns, like align*; gathered: centred)
INNER_ENVIRONMENTS = (
    (re.compile(r"\\(begin|end)\{aligned\}"), r"\\\1{align*}"),
    (re.compile(r"\\begin\{gathered\}"), r"\\begin{array}{c}"),
    (re.compile(r"\\end\{gathered\}"), r"\\end{array}"),
)
ESCAPES = {r"\$": "$", r"\%": "%", r"\&": "&", r"\#": "#", r"\_": "_"}

CSS = """
.saber-text { font: 15px/1.5 system-ui, sans-serif; white-space: normal; }
.saber-text math[display=block] { display: block; margin: .4em 0; }
.saber-text .latex-source { font-family: monospace; background: #fff3cd; color: #7a4b00;
  border-bottom: 1px dashed #b8860b; }
.saber-text .asy { font-family: monospace; font-size: 12px; background: #f4f4f4;
  white-space: pre-wrap; padding: .3em; }
"""


@dataclass
class Rendered:
    html: str
    formulas: int = 0
    unconverted: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)


def formula_mathml(tex: str, display: bool) -> str:
    """One formula as a MathML element; ValueError with the reason when it does not convert."""
    depth = 0
    for k, ch in enumerate(tex):
        if ch in "{}" and (k == 0 or tex[k - 1] != "\\"):
            depth += 1 if ch == "{" else -1
            if depth < 0:
                raise ValueError("a closing brace without its opening one")
    if depth:
        raise ValueError(f"{depth} unclosed brace(s)")
    tex = OPERATORS.sub(r"\\operatorname{\1}", tex)
    for pattern, replacement in INNER_ENVIRONMENTS:
        tex = pattern.sub(replacement, tex)
    try:
        out = latex2mathml.converter.convert(tex, display="block" if display else "inline")
    except Exception as exc:  # the converter's own errors carry no common base class
        raise ValueError(f"{type(exc).__name__} {exc}".strip()) from exc
    unknown = UNKNOWN.search(out)
    if unknown:
        raise ValueError(f"unknown command \\{unknown.group(1)}")
    return sanitized_mathml(out)


# What a formula may draw with: MathML's presentation elements and their layout attributes.
# latex2mathml copies \text{…} and \href{…} into its output unescaped, so a problem's text
# could otherwise carry a script into every page and Label Studio task that shows it.
MATHML_ELEMENTS = frozenset(
    "math mrow mi mn mo ms mtext mspace mfrac msqrt mroot msub msup msubsup munder mover "
    "munderover mmultiscripts mprescripts none mtable mtr mtd mlabeledtr mstyle mpadded "
    "mphantom menclose merror mfenced semantics annotation".split()
)
MATHML_ATTRIBUTES = frozenset(
    "display mathvariant mathcolor mathbackground mathsize stretchy fence separator lspace rspace "
    "accent accentunder columnalign rowalign columnspacing rowspacing columnlines rowlines frame "
    "width height depth linethickness notation displaystyle scriptlevel minsize maxsize "
    "movablelimits symmetric largeop form align columnspan rowspan open close separators "
    "bevelled numalign denomalign voffset encoding".split()
)
TOKEN_ELEMENTS = frozenset({"mi", "mn", "mo", "mtext", "ms", "annotation"})
MATHML_NS = "http://www.w3.org/1998/Math/MathML"
_SAFE_VALUE = re.compile(r"^[\w#.%+\- ]{0,64}$")


# A tag as latex2mathml writes one: a lower-case name and double-quoted attributes. Anything
# else that starts with `<` (`<img src=x …>` typed in \text{}) is text.
_TAG = re.compile(r'<(/?)([a-z][a-z0-9]*)((?:\s+[A-Za-z][\w:-]*="[^"<>]*")*)\s*(/?)>')
_ATTR = re.compile(r'([A-Za-z][\w:-]*)="([^"<>]*)"')
_BARE_AMP = re.compile(r"&(?!#x[0-9A-Fa-f]+;|#[0-9]+;|[A-Za-z][A-Za-z0-9]*;)")


def _text(raw: str) -> str:
    """Text as text: its character references kept as written, any other `&`, `<`, `>` escaped."""
    return _BARE_AMP.sub("&amp;", raw).replace("<", "&lt;").replace(">", "&gt;")


def sanitized_mathml(markup: str) -> str:
    """``markup`` rebuilt from allowed elements and attributes only: any other tag is shown as
    its text, every text node is escaped, a token element (``<mtext>`` of a ``\\text{}``…)
    holds text only, an end tag closes an open element or is text, and each element gets an
    explicit end tag (a page that sanitises HTML, as Label Studio's does, reads ``<mi />`` as
    an open ``<mi>`` that swallows the rest of its row)."""
    out: list[str] = []
    open_: list[str] = []
    pos = 0
    for m in _TAG.finditer(markup):
        out.append(_text(markup[pos : m.start()]))
        pos = m.end()
        closing, tag, attrs, self_closing = m.groups()
        in_token = bool(open_) and open_[-1] in TOKEN_ELEMENTS
        if closing:
            if tag not in open_ or (in_token and tag != open_[-1]):
                out.append(_text(m.group(0)))
                continue
            while open_:
                top = open_.pop()
                out.append(f"</{top}>")
                if top == tag:
                    break
            continue
        if tag not in MATHML_ELEMENTS or in_token:
            out.append(_text(m.group(0)))
            continue
        kept = []
        for name, value in _ATTR.findall(attrs):
            value = html.unescape(value)
            if name == "xmlns" and value == MATHML_NS:
                kept.append(f' xmlns="{MATHML_NS}"')
            elif name in MATHML_ATTRIBUTES and _SAFE_VALUE.match(value):
                kept.append(f' {name}="{html.escape(value, quote=True)}"')
        out.append(f"<{tag}{''.join(kept)}>")
        if self_closing:
            out.append(f"</{tag}>")
        else:
            open_.append(tag)
    out.append(_text(markup[pos:]))
    out.extend(f"</{tag}>" for tag in reversed(open_))
    return "".join(out)


def prose_html(text: str) -> str:
    for k, v in ESCAPES.items():
        text = text.replace(k, v)
    return html.escape(text).replace("\n\n", "<br><br>").replace("\n", " ")


def render(text: str) -> Rendered:
    """``text`` (prose with LaTeX) as HTML: prose escaped, formulas as MathML, a formula that
    does not convert as its marked source (class ``latex-source``, the reason in its title)."""
    out: list[str] = []
    done = Rendered("")
    pos = 0
    for m in spans(text):
        out.append(prose_html(text[pos : m.start]))
        pos = m.end
        g = m.groups
        if g["asy"] is not None:
            out.append(f'<div class="asy" title="figure source (Asymptote), not drawn">'
                       f"{html.escape(g['asy'].strip())}</div>")  # fmt: skip
            continue
        display = g["i"] is None and g["ib"] is None
        tex = next(g[k] for k in ("dd", "db", "de", "i", "ib") if g[k] is not None)
        if g["env"] == "align":  # the environment itself: latex2mathml lays it out as a table
            tex = m.whole
        elif g["env"] is not None:  # the others' alignment marks have no table to align
            tex = re.sub(r"(?<!\\)&", " ", tex)
        done.formulas += 1
        try:
            out.append(formula_mathml(tex.strip(), display))
        except ValueError as exc:
            done.unconverted.append((m.whole, str(exc)))
            out.append(
                f'<code class="latex-source" title="LaTeX not converted: '
                f'{html.escape(str(exc), quote=True)}">{html.escape(m.whole)}</code>'
            )
    out.append(prose_html(text[pos:]))
    done.html = f'<div class="saber-text">{"".join(out)}</div>'
    return done
