"""``inboxguard db upgrade|current``: inboxguard's Alembic revisions, run
without an Alembic environment of your own.

    inboxguard db upgrade [--part inbox|outbox|effects ...] [--version-table NAME] [--json]
    inboxguard db current [--part ...] [--version-table NAME] [--json]

The revisions are the ones shipped in ``inboxguard.migrations``; the table
prefix is ``--prefix``; the applied revisions are kept in
``<prefix>alembic_version`` unless ``--version-table`` names another (your
project's ``alembic_version`` when its own env also runs inboxguard's
branches). ``current`` exits 1 when a part is behind its newest revision
(with ``--part``, also when it was never upgraded).
"""

from __future__ import annotations

import argparse
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard.cli._args import add_database, add_json
from inboxguard.cli._command import run_on_database
from inboxguard.cli._output import EXIT_FOUND, EXIT_OK, UsageError, emit_json, plain, table
from inboxguard.migrations import runner

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``db upgrade`` and ``db current``."""
    parser = subparsers.add_parser("db", help="apply and show inboxguard's Alembic revisions")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, helptext, read_only in (
        ("upgrade", "create or upgrade the tables to the newest revisions", False),
        ("current", "show each part's applied and newest revision (exit 1 if behind)", True),
    ):
        p = actions.add_parser(name, help=helptext, description=helptext)
        add_database(p, "inbox")
        add_json(p)
        p.add_argument(
            "--part",
            action="append",
            choices=list(runner.BRANCHES),
            help="only this part's tables (repeat for more; default: all three)",
        )
        p.add_argument(
            "--version-table",
            metavar="NAME",
            help="where applied revisions are kept (default: <prefix>alembic_version)",
        )
        action = _upgrade if name == "upgrade" else _current
        p.set_defaults(func=_command(action, read_only=read_only))


def _command(action: Any, *, read_only: bool) -> Any:
    def run(args: argparse.Namespace) -> int:
        return run_on_database("db", args, action, read_only=read_only)

    return run


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "table_prefix": args.prefix,
        "parts": args.part or tuple(runner.BRANCHES),
        "version_table": args.version_table,
    }


def _upgrade(engine: Engine, args: argparse.Namespace) -> int:
    try:
        states = runner.upgrade(engine, **_options(args))
    except ImportError as error:
        raise UsageError(_no_alembic(error)) from None
    _show(states, args)
    return EXIT_OK


def _current(engine: Engine, args: argparse.Namespace) -> int:
    try:
        states = runner.current(engine, **_options(args))
    except ImportError as error:
        raise UsageError(_no_alembic(error)) from None
    _show(states, args)
    strict = bool(args.part)
    behind = [s for s in states if (s.current is not None or strict) and not s.up_to_date]
    return EXIT_FOUND if behind else EXIT_OK


def _show(states: list[runner.RevisionState], args: argparse.Namespace) -> None:
    if args.json:
        emit_json([{**plain(s), "up_to_date": s.up_to_date} for s in states])
        return
    rows = [(s.part, s.current or "none", s.head, "yes" if s.up_to_date else "no") for s in states]
    table(("PART", "CURRENT", "HEAD", "UP TO DATE"), rows)


def _plain(state: runner.RevisionState) -> dict[str, Any]:
    return {
        "part": state.part,
        "branch": state.branch,
        "current": state.current,
        "head": state.head,
    }


def _no_alembic(error: ImportError) -> str:
    return f"the db commands need Alembic ({error}); pip install 'inboxguard[migrations]'"
