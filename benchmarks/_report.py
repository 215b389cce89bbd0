"""Write one benchmark's table into its own section of docs/benchmarks.md.

Each benchmark owns a section delimited by ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->``; rewriting one section leaves the others alone.
"""

from __future__ import annotations

import datetime as dt
import platform
import re
from collections.abc import Sequence
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line describing where the figures were measured."""
    import os

    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"


def write_section(name: str, title: str, body: str) -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks.md."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\n_Measured {stamp} on {machine()}._\n\n"
        f"{body.strip()}\n<!-- /bench:{name} -->"
    )
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    pattern = re.compile(
        rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S
    )
    text = (
        pattern.sub(lambda _: section, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + section + "\n"
    )
    DOC.write_text(text)
    print(section)
