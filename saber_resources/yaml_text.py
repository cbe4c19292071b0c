"""YAML read safely: every config, registry, template and card the project reads goes through
``load_yaml``.

``yaml.safe_load`` builds no object but expands aliases: a 361-byte config of nested aliases
(a "billion laughs") took 12.5 s at six levels and would take hours at nine. saber's files need
no alias, so one is refused by name with where it stands; and a text over ``MAX_YAML_BYTES`` is
refused before it is read."""

from __future__ import annotations

from pathlib import Path

import yaml

MAX_YAML_BYTES = 4 * 2**20  # the largest shipped config or template is a few kilobytes


class NoAliasLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` refusing every alias (``*name``)."""

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"an alias (*{event.anchor}) is not allowed here", event.start_mark
            )
        return super().compose_node(parent, index)


def load_yaml(text: str, where: str = "YAML"):
    """The value of a YAML text with no alias in it, at most ``MAX_YAML_BYTES`` long; a
    ``ValueError`` naming ``where`` otherwise."""
    if len(text.encode("utf-8", errors="surrogatepass")) > MAX_YAML_BYTES:
        raise ValueError(f"{where}: over {MAX_YAML_BYTES:,} bytes: not read")
    try:
        return yaml.load(text, Loader=NoAliasLoader)  # noqa: S506 - a SafeLoader
    except yaml.composer.ComposerError as exc:
        if "alias" in str(exc.problem):
            raise ValueError(f"{where}: {exc.problem} {exc.problem_mark}".strip()) from None
        raise


def read_yaml(path: Path, where: str | None = None):
    """``load_yaml`` of a file, reading no more than the cap allows (characters: at least as
    many bytes)."""
    with open(path, encoding="utf-8") as f:
        text = f.read(MAX_YAML_BYTES + 1)
    return load_yaml(text, where or str(path))
