"""Every concrete ``runonce ...`` command the README and docs/ show is one the CLI takes: each is
parsed by the CLI's own parser (an unknown command, option or choice fails here), so the docs
cannot drift from the code. Synopses (``[--opt]``, ``a|b``, ``NAME``) are the reference, not
examples, and are left to ``test_cli``'s help tests. The agents page's snippets are run, not
parsed: tests/integration/test_ways_in.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from runonce.ops.cli import build_parser

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_SHELL = {"bash", "console", "sh", ""}
_PLACEHOLDER = re.compile(r"(?<![\w.-])[A-Z]{1,5}(?![\w.-])")


def shell_lines(page: Path) -> list[str]:
    """The lines of the page's shell (or unmarked) fenced blocks."""
    out, lang = [], None
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            lang = line[3:].strip() if lang is None else None
        elif lang in _SHELL:
            out.append(line)
    return out


def commands(page: Path) -> list[str]:
    found = []
    for line in shell_lines(page):
        if "[" in line or re.search(r"\w\|\w", line):
            continue  # a synopsis
        for part in line.split(" | ")[0].split("&&"):
            part = re.sub(r"\s+#.*$", "", part).strip().removeprefix(".venv/bin/")
            part = re.split(r"\s{3,}", part)[0]  # a synopsis line's description, after its column
            if part.startswith("runonce ") and not _PLACEHOLDER.search(part):
                found.append(part)
    return found


ALL = [(page.relative_to(ROOT).as_posix(), c) for page in PAGES for c in commands(page)]


def test_the_docs_show_commands_to_check() -> None:
    assert len(ALL) >= 15, ALL
    assert {c.split()[1] for _, c in ALL} >= {"up", "submit", "tail", "gateway", "report", "export"}


@pytest.mark.parametrize("page, command", ALL, ids=[f"{p}: {c[:60]}" for p, c in ALL])
def test_a_command_shown_in_the_docs_is_one_the_cli_takes(page: str, command: str) -> None:
    try:
        build_parser().parse_args(shlex.split(command)[1:])
    except SystemExit as exc:
        pytest.fail(f"{page} shows `{command}`, which the CLI refuses (exit {exc.code})")
