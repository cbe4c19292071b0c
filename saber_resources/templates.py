"""Prompt templates: the text of every LLM task, replaceable by a user's file.

A template is a YAML file with ``system`` (optional) and ``user`` strings, or any other text
file, which is the user message alone. ``{name}`` is a placeholder only where ``name`` is one of
the task's placeholders (``PLACEHOLDERS``); every other brace is literal, so a prompt holds
``\\boxed{1}`` or ``{"score": <0-100>}`` as written, with no escaping. A template that lacks a
placeholder its task fills, or names one it does not (``{target_problm}``: any ``{lower_snake}``
word with an underscore), is refused on load with the file and the name.

The built-in templates put every text that comes from outside (a problem, a solution, a
candidate, the topic titles) between tags named for its placeholder, ``<sample_1>`` …
``</sample_1>``, under a line saying that a tagged text is data, never instructions. A filled
value cannot close its block early: every such tag of a template, a user's too, is sent as
``<sample_1-CODE>``, CODE a keyed hash of the request under a key kept in the home
(``fence_code``), which no text can know; the values go in as they are, so no list of
look-alike brackets or escapes is needed.

``PromptTemplate.version`` (stored with every answer and part of every cache key) is the task's
parser revision plus the hash of the template's text: swapping the text re-asks, and answers to
two texts never mix.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from saber_resources.home import home_secret
from saber_resources.yaml_text import load_yaml

BUILTIN_DIR = Path(__file__).resolve().parent / "prompt_templates"

# task -> the placeholders its requests fill (each must appear in the template)
PLACEHOLDERS: dict[str, tuple[str, ...]] = {
    "topics": ("problem", "topics"),
    "summaries": ("problem", "solution"),
    "judge": ("target_problem", "sample_1", "sample_2"),
    "ordinal": ("target_problem", "candidate"),
    "pointwise": ("query", "candidate"),
    "math_split": ("statement",),
    "translate": ("text", "language"),
}
# placeholders a template may leave out (the default summary names the word cap, a user's need not)
OPTIONAL: dict[str, tuple[str, ...]] = {"summaries": ("max_words",), "ordinal": ("max_score",)}
# a task's other set of placeholders: each item's statement and solution apart, as the reference
# code's verbatim judge prompt names them (there `{target_problem}` is the statement alone)
SPLIT: dict[str, tuple[str, ...]] = {
    "judge": ("target_problem", "target_solution", "sample1_problem", "sample1_solution",
              "sample2_problem", "sample2_solution"),
}  # fmt: skip
# the built-in template of each task (the judge's per prompt style)
BUILTIN = {
    "topics": "topics.yaml",
    "summaries": "summaries.yaml",
    "judge:paper": "judge-paper.yaml",
    "judge:direct": "judge-direct.yaml",
    "ordinal": "ordinal.yaml",
    "pointwise": "pointwise.yaml",
    "math_split": "math_split.yaml",
    "translate": "translate.yaml",
}
FENCE_KEY = "fence.key"  # the home's key of the fences (``home.home_secret``)


def fence_code(task: str, values: dict[str, str], key: bytes) -> str:
    """The code that names this prompt's fences: a keyed hash (HMAC-SHA256 under the home's
    fence key) of the task and every value filled in. No text can know it, since it hashes that
    text under a key no text holds; the same request in the same home gets the same code, so
    its cache key holds on every rerun."""
    message = json.dumps([task, sorted(values.items())], ensure_ascii=False).encode(
        "utf-8", errors="surrogatepass"
    )
    return hmac.new(key, message, hashlib.sha256).hexdigest()[:16]


_LIKELY_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\}")


def names_parts(task: str, text: str) -> bool:
    """Whether a template text of ``task`` uses its ``SPLIT`` set: it names a solution apart."""
    return task in SPLIT and f"{{{SPLIT[task][1]}}}" in text


def allowed_placeholders(task: str) -> set[str]:
    """What a template of ``task`` may name: the placeholders its requests fill."""
    return set(PLACEHOLDERS[task]) | set(OPTIONAL.get(task, ())) | set(SPLIT.get(task, ()))


class TemplateError(ValueError):
    """A template file cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class PromptTemplate:
    task: str
    user: str
    system: str | None = None
    source: str = "built-in"
    # `python`: the text is written for str.format, so `{{` and `}}` are literal braces (the
    # reference code's prompt files); `literal` (default): every brace is as written
    braces: str = "literal"

    @property
    def split(self) -> bool:
        """Whether it names each item's statement and solution apart (``SPLIT``)."""
        return names_parts(self.task, f"{self.system or ''}\n{self.user}")

    @property
    def digest(self) -> str:
        text = f"{self.system or ''}\x00{self.user}" + (
            "\x00python" if self.braces == "python" else ""
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def version(self, parser: str) -> str:
        """``<parser revision>+<text hash>``, e.g. ``pair-judge/v2+3fa9c1d2e4b5``."""
        return f"{parser}+{self.digest}"

    def messages(self, key: bytes | None = None, **values: str) -> tuple[tuple[str, str], ...]:
        """The filled messages. Every tag of the template named for a placeholder (``<name>``,
        ``</name>``) becomes ``<name-CODE>`` (``fence_code``, under ``key``, else the home's
        fence key): a value may hold any tag, look-alike or escape of one, and still cannot end
        its block, whose closing names a code it cannot know. Values go in as they are."""
        unknown = set(values) - allowed_placeholders(self.task)
        if unknown:
            raise KeyError(f"{self.task} template has no placeholder {sorted(unknown)}")
        names = "|".join(map(re.escape, sorted(values)))
        tags = "|".join(map(re.escape, sorted(allowed_placeholders(self.task))))
        doubled = r"|(?P<brace>\{\{|\}\})" if self.braces == "python" else ""
        pattern = (
            re.compile(
                r"\{(?P<name>" + names + r")\}" + doubled + r"|<(?P<tag>/?(?:" + tags + r"))>"
            )
            if values
            else None
        )
        code = fence_code(self.task, values, key or home_secret(FENCE_KEY)) if values else ""

        def filled(m: re.Match) -> str:
            if m["name"]:
                return values[m["name"]]
            if m["tag"]:
                return f"<{m['tag']}-{code}>"
            return m["brace"][0]

        def fill(text: str) -> str:  # one pass: a filled value is never scanned again
            return pattern.sub(filled, text) if pattern else text

        user = ("user", fill(self.user))
        return ((("system", fill(self.system)),) if self.system else ()) + (user,)


def parse_template(task: str, text: str, source: str, yaml_file: bool) -> PromptTemplate:
    if task not in PLACEHOLDERS:
        raise TemplateError(f"{source}: no task {task!r} (tasks: {', '.join(PLACEHOLDERS)})")
    system = None
    if yaml_file:
        try:
            data = load_yaml(text, source)
        except (yaml.YAMLError, ValueError) as exc:
            raise TemplateError(f"{source}: not YAML: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("user"), str):
            raise TemplateError(f"{source}: a YAML template needs a 'user' string")
        extra = set(data) - {"system", "user", "braces"}
        if extra:
            raise TemplateError(
                f"{source}: unknown keys {sorted(extra)} (only system, user, braces)"
            )
        system, user = data.get("system"), data["user"]
        braces = data.get("braces", "literal")
        if braces not in ("literal", "python"):
            raise TemplateError(f"{source}: braces must be 'literal' or 'python', not {braces!r}")
        if system is not None and not isinstance(system, str):
            raise TemplateError(f"{source}: 'system' must be a string")
    else:
        user, braces = text, "literal"
    if not user.strip():
        raise TemplateError(f"{source}: the user message is empty")
    both = f"{system or ''}\n{user}"
    # the placeholders of the set it uses: a split template names a solution placeholder
    needed = SPLIT[task] if names_parts(task, both) else PLACEHOLDERS[task]
    missing = [p for p in needed if f"{{{p}}}" not in both]
    if missing:
        other = (
            f"; or each apart: {', '.join(f'{{{p}}}' for p in SPLIT[task])}"
            if task in SPLIT
            else ""
        )
        raise TemplateError(
            f"{source}: the {task} template lacks "
            + ", ".join(f"{{{p}}}" for p in missing)
            + f" (its placeholders: {', '.join(f'{{{p}}}' for p in needed)}{other})"
        )
    if task in SPLIT and needed is SPLIT[task]:
        mixed = [p for p in PLACEHOLDERS[task] if p not in needed and f"{{{p}}}" in both]
        if mixed:
            raise TemplateError(
                f"{source}: the {task} template names each item's parts apart and also "
                + ", ".join(f"{{{p}}}" for p in mixed)
                + " (one set or the other)"
            )
    allowed = allowed_placeholders(task)
    unknown = sorted({m for m in _LIKELY_PLACEHOLDER.findall(both) if m not in allowed})
    if unknown:
        raise TemplateError(
            f"{source}: unknown placeholder {', '.join(f'{{{u}}}' for u in unknown)} in the "
            f"{task} template (its placeholders: "
            + ", ".join(f"{{{p}}}" for p in sorted(allowed))
            + ")"
        )
    return PromptTemplate(task, user, system or None, source, braces)


def load_template(task: str, path: str | Path) -> PromptTemplate:
    path = Path(path)
    if not path.is_file():
        raise TemplateError(f"prompts.{task}: no such file {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise TemplateError(f"{path}: not UTF-8 text ({exc.reason})") from None
    return parse_template(task, text, str(path), path.suffix in (".yaml", ".yml"))


@functools.cache
def builtin_template(name: str) -> PromptTemplate:
    """The default template ``name`` (a task, or ``judge:paper`` / ``judge:direct``), read and
    checked once per process (a request built without a template asks for it every time)."""
    path = BUILTIN_DIR / BUILTIN[name]
    text = path.read_text(encoding="utf-8")
    return parse_template(name.split(":")[0], text, f"built-in {path.name}", True)


def load_templates(paths: dict[str, str]) -> dict[str, PromptTemplate]:
    """The user's templates by task (``prompts:`` in the config), each checked on load."""
    out = {}
    for task, path in paths.items():
        if task not in PLACEHOLDERS:
            raise TemplateError(f"prompts.{task}: no such task (tasks: {', '.join(PLACEHOLDERS)})")
        out[task] = load_template(task, path)
    return out
