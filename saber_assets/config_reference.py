"""The config reference (docs/config-reference.md), generated from the config model: every key
with its type, its default and one line of meaning, the meaning read from the comment the
model's source gives the key (the line above it, or beside it). A test keeps the page equal to
this output, so the reference cannot drift from the code:

    uv run python -m saber_assets.config_reference > docs/config-reference.md
"""

from __future__ import annotations

import ast
import inspect
import re
import types
import typing

from pydantic import BaseModel

from saber_assets.config import PipelineConfig

HEADER = """# Config reference

Generated from `saber_assets/config.py` (`uv run python -m saber_assets.config_reference >
docs/config-reference.md`; `tests/test_docs.py` keeps it current). A key's meaning is the comment
its model gives it; how the sections fit together is in [building.md](building.md). Keys moved
under their package still read from their old place with a message (`MOVED_KEYS`). A config may
begin with `extends: OTHER.yaml` (a path from its own folder): it starts from that config, each
section merged key by key, a list or a value replaced (`configs/paper-published-pool.yaml`
extends `configs/paper.yaml`).
"""


def key_comments(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comment in the model's source: the comment lines right above it, else the
    one beside it; the class docstring's first sentence where a section has none."""
    source = inspect.getsource(model)
    lines = source.splitlines()
    tree = ast.parse(source)
    out: dict[str, str] = {}
    previous: tuple[int, str] | None = None  # (last line, meaning) of the key before
    for node in tree.body[0].body:  # type: ignore[attr-defined]
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#"):
            above.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        beside = lines[node.end_lineno - 1].split("  # ", 1)  # type: ignore[operator]
        text = " ".join(above) or (beside[1].strip() if len(beside) == 2 else "")
        meaning = first_sentence(text)
        # a key right under another, with no comment of its own, is of that key's group
        if not meaning and previous and previous[0] == node.lineno - 1:
            meaning = previous[1]
        out[node.target.id] = meaning
        previous = (node.end_lineno, meaning)  # type: ignore[assignment]
    return out


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence ("e.g." and "i.e." do not)."""
    text = " ".join(text.split())
    match = re.match(r"(.+?(?<!e\.g)(?<!i\.e)\.)(\s|$)", text)
    return match.group(1) if match else text


def type_name(annotation) -> str:
    """A short, readable type: ``int``, ``list[str]``, ``one of a, b``, ``X or null``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(names) + (" or null" if type(None) in args else "")
    if origin in (list, tuple, dict):
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(section)"
    text = "null" if value is None else repr(value).replace("'", "")
    return f"`{text}`" if len(text) <= 48 else f"`{text[:45]}…`"


def rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, type, default, meaning) of every key of ``model``, sub-sections after their key."""
    comments = key_comments(model)
    out = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{field.alias or name}"  # what a config file writes (`in`, not `in_`)
        annotation = field.annotation
        sub = _model_of(annotation)
        meaning = comments.get(name, "") or (first_sentence(sub.__doc__ or "") if sub else "")
        out.append((key, type_name(annotation), default_text(field), meaning))
        if sub is not None:
            origin = typing.get_origin(annotation)
            inner = "[]" if origin is list else ".*" if origin is dict else ""
            out += rows(sub, f"{key}{inner}.")
    return out


def _model_of(annotation) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def reference() -> str:
    """The page: one table per top-level section, in the model's order."""
    parts = [HEADER]
    top = rows(PipelineConfig)
    for name, field in PipelineConfig.model_fields.items():
        section = [r for r in top if r[0] == name or r[0].startswith(f"{name}.")]
        sub = _model_of(field.annotation)
        lead = section[0][3] if section and section[0][3] else ""
        parts.append(f"\n## `{name}`\n")
        if lead:
            parts.append(f"{lead}\n")
        if sub is None:
            parts.append(f"Type {section[0][1]}, default {section[0][2]}.\n")
            continue
        parts.append("| key | type | default | meaning |\n|---|---|---|---|")
        for key, kind, default, meaning in section[1:]:
            cell = meaning.replace("|", "\\|")
            parts.append(f"| `{key}` | {kind.replace('|', '/')} | {default} | {cell} |")
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":
    print(reference(), end="")
