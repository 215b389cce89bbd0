"""``inboxguard guarantees --app module:object [--json] [--check] [--lock FILE]``.

Renders every guarded handler's guarantee table (Markdown, or ``--json``);
``--lock FILE`` writes the reviewed tables; ``--check`` exits 1 with one line
per contradiction, and with ``--lock`` also per change since the review.
Exit status: 0 fine, 1 contradictions or changes, 2 the app cannot be loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from inboxguard.cli._app import resolve_object
from inboxguard.errors import ConfigurationError
from inboxguard.guarantees import (
    Contradiction,
    contradictions_of,
    guarantees_markdown,
    guarantees_of,
    lock_changes,
    lock_text,
    read_lock,
)

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``guarantees``."""
    parser = subparsers.add_parser(
        "guarantees",
        help="render, check and lock each guarded handler's guarantee table",
        description=(
            "Show the guarantee table of every guarded handler of an application,"
            " derived from its running configuration. --check exits 1 with one line per"
            " contradiction (and, with --lock FILE, per change since the reviewed lock);"
            " --lock FILE alone writes the lock."
        ),
    )
    parser.add_argument(
        "--app",
        required=True,
        metavar="MODULE:OBJECT",
        help=(
            "a Celery app, Dramatiq broker, Inbox or RedisInbox, or an object or list"
            " holding them, or a module, e.g. myapp.celery:app (resolved from the current"
            " directory; OBJECT() calls a factory, and runs it to completion when it is async)"
        ),
    )
    parser.add_argument("--json", action="store_true", help="JSON instead of Markdown")
    parser.add_argument("--check", action="store_true", help="exit 1 on any contradiction")
    parser.add_argument(
        "--lock",
        metavar="FILE",
        type=Path,
        help="write the reviewed tables to FILE; with --check, compare with FILE",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        app = resolve_object(args.app, module_itself=True)
        guarantees = guarantees_of(app)
        if args.check:
            problems = contradictions_of(app)
            if args.lock is not None:
                problems += _lock_problems(args.lock, guarantees)
            return _report(problems, len(guarantees), args)
    except ConfigurationError as error:
        print(f"inboxguard guarantees: {error}", file=sys.stderr)
        return 2
    if args.lock is not None:
        args.lock.write_text(lock_text(guarantees), encoding="utf-8")
        print(f"wrote the guarantee tables of {len(guarantees)} handlers to {args.lock}")
        return 0
    if args.json:
        print(json.dumps([g.to_json() for g in guarantees], indent=2))
    else:
        print(guarantees_markdown(guarantees), end="")
    return 0


def _lock_problems(path: Path, guarantees: Any) -> list[Contradiction]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return [
            Contradiction(
                "lock",
                "lock",
                str(path),
                f"{path} does not exist: review the tables and write it with --lock {path}",
            )
        ]
    return lock_changes(guarantees, read_lock(text, str(path)))


def _report(problems: list[Contradiction], count: int, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps([p.to_json() for p in problems], indent=2))
    elif problems:
        for problem in problems:
            print(problem)
    else:
        locked = f"; {args.lock} matches" if args.lock is not None else ""
        print(f"ok: {count} handlers, no contradiction{locked}")
    return 1 if problems else 0
