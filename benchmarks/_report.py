"""Write one benchmark's table into its own section of docs/benchmarks.md.

Each benchmark owns a section delimited by ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->``; rewriting one section leaves the others alone.
"""

from __future__ import annotations

import datetime as dt
import platform
import re
import sys
from collections.abc import Sequence
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
SECTION_NAME = re.compile(r"[a-z0-9_-]+")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line describing where the figures were measured."""
    import os

    return f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"


def write_section(
    name: str,
    title: str,
    body: str,
    *,
    load: object | None = None,
    rounds: int | None = None,
    command: str | None = None,
) -> None:
    """Replace (or append) the section ``name`` of docs/benchmarks.md.

    ``load`` (a :class:`benchmarks._harness.Load`) and ``rounds`` are printed
    under the title with the ``command`` that produced the section (default
    ``python -m benchmarks NAME``). A run of fewer than five rounds prints its
    section and leaves the page alone.
    """
    from benchmarks._harness import publishable

    if not SECTION_NAME.fullmatch(name):
        raise ValueError(
            f"section name {name!r}: use lower-case letters, digits, '_' or '-'"
            " (tests/docs/test_benchmarks_page.py finds sections by that pattern)"
        )
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    command = command or f"python -m benchmarks {name}"
    meta = f"_Measured {stamp} on {machine()} by `{command}`"
    if rounds is not None:
        meta += f", {rounds} rounds"
    if load is not None:
        meta += f"; {load}"
    section = (
        f"<!-- bench:{name} -->\n## {title}\n\n{meta}._\n\n{body.strip()}\n<!-- /bench:{name} -->"
    )
    if rounds is None and name != "targets":
        print(
            f"warning: section {name!r} written without rounds=: the page cannot show how"
            " many rounds it took (pass rounds= and load=, see benchmarks/_harness.py)",
            file=sys.stderr,
        )
    if rounds is not None and not publishable(rounds):
        print(section)
        print(f"({rounds} rounds: a smoke run, docs/benchmarks.md left alone)")
        return
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
