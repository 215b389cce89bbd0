"""The ``inboxguard`` command: a thin shell over the library.

Each subcommand lives in a module of this package that defines
``register(subparsers)``; the module adds its parser and sets ``func`` to a
callable ``(args) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

#: Subcommand modules, in the order ``--help`` lists them.
_MODULES: tuple[str, ...] = ("retention", "purge", "quarantine", "outbox", "effects")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="inboxguard",
        description="Operate inboxguard: retention, purge, quarantine, outbox, effects.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _MODULES:
        importlib.import_module(f"inboxguard.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = func(args)
    return status
