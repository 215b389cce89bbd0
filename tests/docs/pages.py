"""The Markdown pages the docs checks read, and their fenced blocks.

Every check globs README.md and docs/**/*.md, so a page another change adds
is checked without editing a test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>`{3,}|~{3,})(?P<lang>[^\s`]*)")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its language tag and its body lines."""

    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.body)


def pages() -> list[Path]:
    """README.md and every Markdown page of the site, generated ones aside."""
    found = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    return [p for p in found if EXAMPLES not in p.parents]


def blocks(path: Path) -> Iterator[Block]:
    """The fenced blocks of ``path`` (backticks or tildes, indented or not)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, ticks = match["indent"], match["ticks"]
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(ticks):
            j += 1
        body = tuple(line.removeprefix(indent) for line in lines[i + 1 : j])
        yield Block(path, i + 1, match["lang"].lower(), body)
        i = j + 1


def prose_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line outside fenced blocks."""
    inside: str | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = _FENCE.match(line)
        if inside is None and match:
            inside = match["ticks"]
        elif inside is not None and line.strip().startswith(inside):
            inside = None
        elif inside is None:
            yield number, line


_EXAMPLE_MARK = re.compile(
    r"^<!-- example: (?P<file>[\w.-]+\.(?:py|ini))(?::(?P<section>[\w-]+))? -->$"
)


def example_mark(block: Block) -> tuple[str, str | None] | None:
    """(file, section) of the ``<!-- example: FILE[:section] -->`` line right
    before ``block``'s fence, else None: the block shows that sample inline."""
    if block.line < 2:
        return None
    lines = block.path.read_text(encoding="utf-8").splitlines()
    match = _EXAMPLE_MARK.match(lines[block.line - 2].strip())
    return (match["file"], match["section"]) if match else None


_SNIPPET = re.compile(r'^--8<-- "examples/(?P<file>[\w.-]+\.py)(?::(?P<section>[\w-]+))?"$')
_MARKER = re.compile(r"^\s*# --8<-- \[(?P<kind>start|end):(?P<name>[\w-]+)\]\s*$")


def snippet(line: str) -> tuple[str, str | None] | None:
    """(file, section) of a ``--8<-- "examples/<file>[:section]"`` line, else None."""
    match = _SNIPPET.match(line.strip())
    return (match["file"], match["section"]) if match else None


def example_text(file: str, section: str | None = None) -> str:
    """What the site shows for an include: the file (or one section of it)
    without the section marker lines, as pymdownx.snippets renders it."""
    lines = (EXAMPLES / file).read_text(encoding="utf-8").splitlines()
    if section is not None:
        start = next(
            i for i, line in enumerate(lines) if line.strip() == f"# --8<-- [start:{section}]"
        )
        end = next(i for i, line in enumerate(lines) if line.strip() == f"# --8<-- [end:{section}]")
        lines = lines[start + 1 : end]
    return "".join(line + "\n" for line in lines if not _MARKER.match(line))
