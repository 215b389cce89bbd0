"""``inboxguard db upgrade|current``: inboxguard's Alembic revisions, run
without an Alembic environment of your own.

    inboxguard db upgrade [--part inbox|outbox|effects ...] [--version-table NAME] [--json]
    inboxguard db current [--part ...] [--version-table NAME] [--json]
    inboxguard db stamp REVISION... [--version-table NAME]

The revisions are the ones shipped in ``inboxguard.migrations``; the table
prefix is ``--prefix``; the applied revisions are kept in
``<prefix>alembic_version`` unless ``--version-table`` names another (your
project's ``alembic_version`` when its own env also runs inboxguard's
branches). ``current`` exits 1 when a part is behind its newest revision
(with ``--part``, also when it was never upgraded). Tables made by
``create_schema()`` carry no revision: ``upgrade`` refuses them rather than
fail half-way, and ``stamp ig0004`` (the revision they match) adopts them.
"""

from __future__ import annotations

import argparse
from typing import Any

from sqlalchemy import inspect
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
    st = actions.add_parser(
        "stamp",
        help="record a revision as applied without running it (adopt create_schema() tables)",
    )
    add_database(st, "inbox")
    add_json(st)
    st.add_argument("revision", nargs="+", metavar="REVISION", help="e.g. ig0004 igox0001 igfx0001")
    st.add_argument("--version-table", metavar="NAME", help="default: <prefix>alembic_version")
    st.set_defaults(func=_command(_stamp, read_only=False))


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
    options = _options(args)
    try:
        _refuse_unrecorded_tables(engine, options)
        states = runner.upgrade(engine, **options)
    except ImportError as error:
        raise UsageError(_no_alembic(error)) from None
    _show(states, args)
    return EXIT_OK


def _refuse_unrecorded_tables(engine: Engine, options: dict[str, Any]) -> None:
    """Tables that exist with no recorded revision would make the first
    revision fail on "already exists"; name the way out instead."""
    states = runner.current(engine, **options)
    present = set(inspect(engine).get_table_names())
    first = runner.first_tables(options["table_prefix"])
    unrecorded = [s for s in states if s.current is None and first[s.part] in present]
    if unrecorded:
        names = ", ".join(first[s.part] for s in unrecorded)
        heads = " ".join(s.head for s in unrecorded)
        msg = (
            f"{names}: the tables exist but no revision is recorded (create_schema() made"
            f" them); if they match this release, record that with: inboxguard db stamp"
            f" {heads}; then upgrade"
        )
        raise UsageError(msg)


def _stamp(engine: Engine, args: argparse.Namespace) -> int:
    try:
        states = runner.stamp(
            engine, *args.revision, table_prefix=args.prefix, version_table=args.version_table
        )
    except ImportError as error:
        raise UsageError(_no_alembic(error)) from None
    except Exception as error:  # alembic's CommandError: no such revision
        if type(error).__name__ != "CommandError":
            raise
        raise UsageError(f"db stamp {' '.join(args.revision)}: {error}") from None
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
