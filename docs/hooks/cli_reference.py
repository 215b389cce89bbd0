"""MkDocs hook: write the CLI reference page from the argparse parser.

The page ``cli-reference.md`` never exists on disk. It is generated at every
build from ``inboxguard.cli.build_parser()``, so a subcommand or an option
added to the code appears in the site without anyone editing a page, and a
removed one disappears. Each command gets its own heading (an anchor other
pages can link to, such as ``cli-reference.md#inboxguard-quarantine-list``)
and its ``--help`` text, rendered at a fixed width so the output does not
depend on the terminal that runs the build.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

PAGE = "cli-reference.md"
_WIDTH = "96"

_INTRO = """# CLI reference

Generated at build time from the `inboxguard` command's own argument parser,
so it always matches the installed version (`inboxguard --help` prints the
same text). Each command has its own anchor, for example
`cli-reference.md#inboxguard-purge`.

"""


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of each direct subcommand, in registration order."""
    for action in parser._actions:  # noqa: SLF001 - argparse exposes no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # aliases map to the same parser
                    seen.add(id(sub))
                    yield name, sub


def _walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for name, sub in _subcommands(parser):
        yield from _walk(sub, (*path, name))


def render() -> str:
    """The whole Markdown page."""
    from inboxguard.cli import build_parser  # noqa: PLC0415 - the hook loads before the package

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _WIDTH  # argparse wraps help to $COLUMNS
    try:
        parts = [_INTRO]
        for path, parser in _walk(build_parser(), ("inboxguard",)):
            level = "#" * min(len(path) + 1, 6)
            parts.append(f"{level} `{' '.join(path)}`\n\n")
            parts.append("```text\n" + parser.format_help().rstrip() + "\n```\n\n")
        return "".join(parts)
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def on_files(files: Any, config: Any) -> Any:
    """Add the generated page to the build."""
    from mkdocs.structure.files import File  # noqa: PLC0415 - only inside mkdocs

    files.append(File.generated(config, PAGE, content=render()))
    return files
