"""The ``inboxguard`` command: a thin shell over the library.

Each subcommand lives in a module of this package that defines
``register(subparsers)``; the module adds its parser and sets ``func`` to a
callable ``(args) -> int`` (the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from inboxguard import __version__

__all__ = ["main"]

#: Subcommand modules, in the order ``--help`` lists them.
_MODULES: tuple[str, ...] = (
    "stats",
    "explain",
    "quarantine",
    "purge",
    "retention",
    "doctor",
    "db",
    "outbox",
    "effects",
    "guarantees",
    "serve_metrics",
    "dashboard",
    "demo",
)
#: Exit status after the reader of stdout went away: 128 + SIGPIPE.
_BROKEN_PIPE = 141


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="inboxguard",
        description="Operate inboxguard from a shell: inspect evidence, quarantine, outbox"
        " and effects; purge; check retention and a deployment; apply the migrations."
        " Every database command takes --db URL (or $INBOXGUARD_DB_URL) and --json.",
        epilog="Exit status: 0 done, 1 found something to look at, 2 bad input or"
        " configuration, 3 database unreachable, 141 output pipe closed.",
    )
    parser.add_argument("--version", action="version", version=f"inboxguard {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _MODULES:
        importlib.import_module(f"inboxguard.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status.

    Output piped into a reader that stops early (``| head``) ends the command
    quietly with status 141 (128 + SIGPIPE, as a shell reports it), never
    with a traceback.
    """
    try:
        try:
            return _run(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        _silence_stdout()
        return _BROKEN_PIPE


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    status: int = func(args)
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of the
    unwritten output raises no second ``BrokenPipeError`` at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests capture it)
        pass
    finally:
        os.close(devnull)
