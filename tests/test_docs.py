"""The docs as a user copies from them: every `saber …` command line in the README and under
`docs/` parses against the real command line (``cli.build_parser``), and every relative link
points to a file that exists."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from saber_assets.cli import build_parser
from saber_assets.config import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
SHELL_FENCES = {"bash", "sh", "shell", "console", ""}
COMMAND = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*(?:uv run )?(saber\s.*)$")
INLINE = re.compile(r"`((?:uv run )?saber [^`]+)`")
PLACEHOLDER = re.compile(r"[\[\]<>…]|\.\.\.")


def command_lines(page: Path) -> list[tuple[int, str]]:
    """(line number, the command after `saber`) of each command line: in shell code blocks
    (comments cut, continuation lines joined) and in inline code spans without placeholders."""
    out, fence, held = [], None, ""
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence is None:
            out += [
                (n, m.group(1)) for m in INLINE.finditer(line) if not PLACEHOLDER.search(m.group(1))
            ]
            continue
        if fence not in SHELL_FENCES:
            continue
        text = (held + " " + line.strip()).strip()
        held = ""
        if text.endswith("\\"):
            held = text[:-1]
            continue
        if m := COMMAND.match(text):
            out.append((n, m.group(1)))
    return out


def argv_of(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    words = words[words.index("saber") + 1 :] if "saber" in words else words
    return [w for w in words if w != "&"]


CASES = [(page, n, cmd) for page in PAGES for n, cmd in command_lines(page)]


def test_the_docs_show_commands_to_check():
    assert len(CASES) >= 25 and {p.name for p, _, _ in CASES} >= {"README.md", "building.md"}


@pytest.mark.parametrize(
    ("page", "line", "command"),
    CASES,
    ids=[f"{p.relative_to(REPO_ROOT)}:{n}" for p, n, _ in CASES],
)
def test_every_saber_command_line_in_the_docs_parses(page, line, command):
    argv = argv_of(command)
    if len(argv) == 1:  # a command named in the text (`saber export writes …`): it exists
        argv.append("--help")
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0 and argv[-1] == "--help":
            return
        raise AssertionError(
            f"{page.relative_to(REPO_ROOT)}:{line}: `{command}` does not parse"
        ) from exc


def test_a_wrong_command_line_is_caught():
    for wrong in ("uv run saber build --selekt domains", "saber evaluat bm25", "saber export out"):
        with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()):
            build_parser().parse_args(argv_of(wrong))
    assert argv_of("uv run saber build --force  # rebuild") == ["build", "--force"]


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_points_to_a_file(page):
    broken = [
        target
        for target in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken, f"{page.relative_to(REPO_ROOT)}: {broken}"


def test_the_config_reference_is_generated_from_the_config_model():
    """docs/config-reference.md is what `python -m saber_assets.config_reference` writes: every
    top-level key a section, every key a row with its type, default and a meaning."""
    from saber_assets.config import PipelineConfig
    from saber_assets.config_reference import reference, rows

    page = (REPO_ROOT / "docs" / "config-reference.md").read_text()
    assert page == reference(), (
        "the config model changed: uv run python -m saber_assets.config_reference > "
        "docs/config-reference.md"
    )
    for key in PipelineConfig.model_fields:
        assert f"\n## `{key}`\n" in page, key
    unexplained = [key for key, _, _, meaning in rows(PipelineConfig) if not meaning]
    assert not unexplained, f"give these keys a comment in saber_assets/config.py: {unexplained}"


def prose_paragraphs(text: str) -> list[tuple[int, int]]:
    """(first line, length) of each prose paragraph or list item of a markdown page: code
    blocks, tables and headings left out; a list item is a paragraph of its own."""
    out: list[tuple[int, int]] = []
    start, length, fence = 0, 0, False
    for number, line in enumerate([*text.split("\n"), ""], 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            line = ""
        if fence or not line.strip() or line.lstrip().startswith(("|", "#", "<")):
            if length:
                out.append((start, length))
            length = 0
            continue
        if re.match(r"\s*([-*]|\d+\.)\s", line) and length:
            out.append((start, length))
            length = 0
        if not length:
            start = number
        length += 1
    return out


def test_no_prose_paragraph_of_the_docs_runs_past_twelve_lines():
    """A page a person reads, not a wall (the issue's bound; most run under eight)."""
    long = [
        f"{page.relative_to(REPO_ROOT)}:{start} ({length} lines)"
        for page in PAGES
        for start, length in prose_paragraphs(page.read_text())
        if length > 12
    ]
    assert not long, long
    assert prose_paragraphs("a\nb\n\n- c\n- d\n  e\n```\nx\n```\n| t |") == [(1, 2), (4, 1), (5, 2)]


PROSE_WORDS, CELL_WORDS = 150, 120


def long_passages(text: str) -> list[tuple[int, str, int]]:
    """(line, "prose" or "cell", words) of every paragraph or list item over ``PROSE_WORDS``
    and every table cell over ``CELL_WORDS`` of a markdown page (code blocks not counted)."""
    import re

    found, block, start, in_code = [], [], 0, False

    def close() -> None:
        words = len(" ".join(block).split())
        if words > PROSE_WORDS:
            found.append((start, "prose", words))
        block.clear()

    for n, line in enumerate([*text.splitlines(), ""], 1):
        if line.startswith("```"):
            in_code = not in_code
            close()
            continue
        if in_code:
            continue
        if not line.strip() or line.startswith(("|", "#")):
            close()
            if line.startswith("|"):
                found += [(n, "cell", w) for c in line.strip("|").split("|")
                          if (w := len(c.split())) > CELL_WORDS]  # fmt: skip
            continue
        if re.match(r"\s*(?:[-*]|\d+\.)\s", line):
            close()
        if not block:
            start = n
        block.append(line)
    return found


def test_no_prose_block_or_table_cell_runs_too_long():
    """A paragraph of at most 150 words and a table cell of at most 120 (the generated config
    reference aside): history goes to CHANGELOG.md, not into the page."""
    pages = sorted(p for p in (REPO_ROOT / "docs").glob("*.md") if p.name != "config-reference.md")
    long = {p.name: got for p in pages if (got := long_passages(p.read_text()))}
    assert long == {}
    planted = "word " * 151 + "\n\n| a | " + "word " * 121 + "|\n"
    assert [kind for _, kind, _ in long_passages(planted)] == ["prose", "cell"]


def test_the_tutorials_backfill_of_one_domain_rebuilds_what_it_says(
    shared_build, tmp_path, monkeypatch, capsys
):
    """docs/tutorial.md step 5, run on a copy of the tiny build: the domain's candidates,
    tournament and ratings and every retriever's runs on it, and nothing else."""
    from saber_assets.cli import main

    page = (REPO_ROOT / "docs" / "tutorial.md").read_text()
    command = next(
        line for line in page.splitlines() if line.startswith("uv run saber build --select domain=")
    )
    args = shlex.split(command)[3:]  # after `uv run saber`
    cfg = shared_build("tiny").copy_to(tmp_path, monkeypatch)
    assert main([*args, "--config", str(cfg), "--steps"]) == 0
    ran = re.findall(r"^\s*(\w+) \[([^\]]+)\]", capsys.readouterr().out, re.MULTILINE)
    assert ran and {partition.split("|")[0] for _, partition in ran} == {"Algebra"}
    steps = {asset for asset, _ in ran}
    assert steps == {"query_candidates", "tournament_judgments", "relevance_ratings",
                     "retriever_runs"}, ran  # fmt: skip
    runs = {p.split("|")[1] for a, p in ran if a == "retriever_runs"}
    assert runs == {"bm25", "jaccard-no-tok"}  # every retriever of the tiny registry
