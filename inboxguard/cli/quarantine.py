"""``inboxguard quarantine``: the messages the inbox refused, from a shell.

    inboxguard quarantine list --db URL [--consumer NAME] [--status open|resolved|all]
    inboxguard quarantine show ID --db URL
    inboxguard quarantine resolve ID --db URL

Output is JSON. ``show`` prints the record with the message details the
adapter kept (body, headers, properties), enough to replay it by hand.
``resolve`` marks an open record handled; it changes no evidence, so a
replay of the same command is judged exactly as before. The exit status is
0 on success, 1 when no open record has that ID, 2 on bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from sqlalchemy import create_engine
from sqlalchemy.exc import ArgumentError, DBAPIError

from inboxguard import ConfigurationError, Inbox
from inboxguard.cli._args import add_database, positive_int
from inboxguard.cli._inbox import missing_table, open_inbox

__all__ = ["register"]

_STATUSES = ("open", "resolved", "all")


def register(subparsers: Any) -> None:
    """Add ``quarantine`` and its actions to the command line."""
    parser = subparsers.add_parser("quarantine", help="inspect and resolve refused messages")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        add_database(p, "inbox")

    listing = actions.add_parser("list", help="quarantine records, oldest first")
    common(listing)
    listing.add_argument("--consumer", help="only this consumer's records")
    listing.add_argument("--status", choices=_STATUSES, default="open", help="default: open")
    listing.add_argument("--limit", type=positive_int, default=100, metavar="N")
    listing.set_defaults(func=_list)

    show = actions.add_parser("show", help="one record with the refused message's details")
    common(show)
    show.add_argument("id", type=positive_int, metavar="ID")
    show.set_defaults(func=_show)

    res = actions.add_parser("resolve", help="mark an open record handled")
    common(res)
    res.add_argument("id", type=positive_int, metavar="ID")
    res.set_defaults(func=_resolve)


class _UsageError(Exception):
    pass


def _run(args: argparse.Namespace, action: Any) -> int:
    if not args.db:
        print(
            "inboxguard quarantine: --db is required (or set INBOXGUARD_DB_URL):"
            " the inbox's SQLAlchemy URL",
            file=sys.stderr,
        )
        return 2
    try:
        engine = create_engine(args.db)
    except (ArgumentError, ImportError) as error:
        print(f"inboxguard quarantine: --db {args.db!r} is not usable: {error}", file=sys.stderr)
        return 2
    try:
        inbox = open_inbox(engine, args.prefix)
        missing = missing_table(inbox, inbox.tables.quarantine)
        if missing is not None:
            raise _UsageError(missing)
        status: int = action(inbox, args)
        return status
    except _UsageError as error:
        print(f"inboxguard quarantine: {error}", file=sys.stderr)
        return 2
    except ConfigurationError as error:
        print(f"inboxguard quarantine: --prefix: {error}", file=sys.stderr)
        return 2
    except DBAPIError as error:
        print(f"inboxguard quarantine: the database refused: {error.orig}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()


def _emit(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def _list(args: argparse.Namespace) -> int:
    def action(inbox: Inbox, args: argparse.Namespace) -> int:
        status = None if args.status == "all" else args.status
        records = inbox.quarantined(args.consumer, status=status, limit=args.limit)
        _emit([{k: v for k, v in dataclasses.asdict(r).items() if k != "details"} for r in records])
        return 0

    return _run(args, action)


def _show(args: argparse.Namespace) -> int:
    def action(inbox: Inbox, args: argparse.Namespace) -> int:
        found = inbox.quarantine_record(args.id)
        if found is None:
            print(f"inboxguard quarantine: no record with ID {args.id}", file=sys.stderr)
            return 1
        _emit(dataclasses.asdict(found))
        return 0

    return _run(args, action)


def _resolve(args: argparse.Namespace) -> int:
    def action(inbox: Inbox, args: argparse.Namespace) -> int:
        if not inbox.resolve_quarantine(args.id):
            print(f"inboxguard quarantine: no open record with ID {args.id}", file=sys.stderr)
            return 1
        record = inbox.quarantine_record(args.id)
        if record is None:  # a purge deleted it since; the resolution stands
            print(f"inboxguard quarantine: no record with ID {args.id}", file=sys.stderr)
            return 1
        _emit({k: v for k, v in dataclasses.asdict(record).items() if k != "details"})
        return 0

    return _run(args, action)
