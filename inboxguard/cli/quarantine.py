"""``inboxguard quarantine``: the messages the inbox refused, from a shell.

    inboxguard quarantine list --db URL [--consumer NAME] [--status open|resolved|all]
    inboxguard quarantine show ID --db URL
    inboxguard quarantine resolve ID --db URL
    inboxguard quarantine replay ID --db URL --transport module:factory --reason TEXT
                                   [--by NAME] [--destination NAME]

Output is JSON. ``show`` prints the record with the message details the
adapter kept (body, headers, properties) and the replays recorded so far.
``resolve`` marks an open record handled; it changes no evidence, so a
replay of the same command is judged exactly as before. ``replay``
publishes the stored message again, under the same command ID, through an
outbox transport (``module:name`` of a transport or of a zero-argument
factory, as ``outbox dispatch --transport`` takes), then records who
(``--by``, default: the OS user), why (``--reason``), where and the
transport's receipt, and marks the record resolved. The exit status is 0 on
success, 1 when no (open) record has that ID or the transport failed
(nothing is recorded then), 2 on bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import getpass
import json
import sys
from typing import Any

from sqlalchemy import create_engine, inspect
from sqlalchemy.exc import ArgumentError, DBAPIError

from inboxguard import ConfigurationError, Inbox
from inboxguard.cli._args import add_database, positive_int
from inboxguard.cli._inbox import missing_table, open_inbox
from inboxguard.cli._replay import describe, replay_message
from inboxguard.cli.outbox import load_transport

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

    replay = actions.add_parser(
        "replay", help="publish a refused message again through a transport, and record it"
    )
    common(replay)
    replay.add_argument("id", type=positive_int, metavar="ID")
    replay.add_argument(
        "--transport",
        required=True,
        help="module:name of an outbox transport, or of a zero-argument factory returning one",
    )
    replay.add_argument("--reason", required=True, help="why it is replayed (recorded)")
    replay.add_argument("--by", default=None, help="who replays it (default: the OS user)")
    replay.add_argument(
        "--destination", help="where to publish (default: where the message came from)"
    )
    replay.set_defaults(func=_replay)


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
        shown = dataclasses.asdict(found)
        if inspect(inbox.engine).has_table(inbox.tables.quarantine_replays.name):
            shown["replays"] = [dataclasses.asdict(r) for r in inbox.quarantine_replays(args.id)]
        _emit(shown)
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


def _replay(args: argparse.Namespace) -> int:
    def action(inbox: Inbox, args: argparse.Namespace) -> int:
        if not args.reason.strip():
            raise _UsageError("--reason must say why the message is replayed")
        missing = missing_table(inbox, inbox.tables.quarantine_replays)
        if missing is not None:
            raise _UsageError(f"{missing}; with Alembic: alembic upgrade inboxguard@head")
        record = inbox.quarantine_record(args.id)
        if record is None:
            print(f"inboxguard quarantine: no record with ID {args.id}", file=sys.stderr)
            return 1
        try:
            message = replay_message(record, args.destination, dt.datetime.now(dt.UTC))
            transport = load_transport(args.transport)
        except ConfigurationError as error:
            raise _UsageError(str(error)) from error
        try:
            receipt = transport(message)
        except Exception as error:  # the broker did not take it: nothing is recorded
            print(
                f"inboxguard quarantine: the transport did not publish record {args.id}"
                f" ({type(error).__name__}: {error}); nothing was recorded",
                file=sys.stderr,
            )
            return 1
        finally:
            _close(transport)
        replayed = inbox.record_quarantine_replay(
            record,
            destination=message.destination,
            replayed_by=args.by or _os_user(),
            reason=args.reason,
            receipt=receipt,
        )
        _emit({**describe(message), "replay": dataclasses.asdict(replayed)})
        return 0

    return _run(args, action)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in this environment
        return "unknown"


def _close(transport: Any) -> None:
    close = getattr(transport, "close", None)
    if callable(close):
        close()
