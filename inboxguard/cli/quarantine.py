"""``inboxguard quarantine``: the messages the inbox refused, from a shell.

    inboxguard quarantine list [--consumer NAME] [--status open|resolved|all]
                               [--limit N] [--after ID] [--json]
    inboxguard quarantine show ID [--json]
    inboxguard quarantine release ID --reason TEXT [--by NAME] [--json]
    inboxguard quarantine resolve ID --reason TEXT [--by NAME] [--json]
    inboxguard quarantine replay ID --transport module:factory --reason TEXT
                                   [--by NAME] [--destination NAME] [--again] [--json]

Every subcommand takes ``--db URL`` (or ``$INBOXGUARD_DB_URL``) and
``--prefix``, or, for a RedisInbox, ``--redis URL`` (or
``$INBOXGUARD_REDIS_URL``) and ``--key-prefix``. ``show`` prints the record
with the message details the adapter kept and every replay, release and
resolution recorded. ``release`` lets the command be processed again: it
deletes the evidence that refused it and resolves the record. ``resolve``
marks an open record handled and changes no evidence. ``replay`` publishes
the stored message again, under the same command ID, through an outbox
transport. Each action records who (``--by``, default: the OS user), why
(``--reason``) and when. Exit status: 0 done, 1 no (open) record has that
ID or the transport failed (nothing recorded), 2 bad input, 3 the database
or Redis server cannot be reached.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard import (
    ConfigurationError,
    InboxStore,
    quarantine_count,
    quarantine_list,
    quarantine_show,
    release_quarantine,
    resolve_quarantine,
)
from inboxguard.cli._args import add_json, positive_int, recorded_text
from inboxguard.cli._command import fail, run_on_inbox
from inboxguard.cli._inbox import missing_table, open_inbox
from inboxguard.cli._output import (
    EXIT_FOUND,
    EXIT_OK,
    UsageError,
    emit_json,
    fields,
    human,
    plain,
    table,
)
from inboxguard.cli._redis import add_inbox_target
from inboxguard.cli._replay import describe, replay_message
from inboxguard.cli.outbox import load_transport
from inboxguard.inbox import QuarantineAction, QuarantineRecord
from inboxguard.operations import QuarantineDetail

__all__ = ["register"]

_STATUSES = ("open", "resolved", "all")


def register(subparsers: Any) -> None:
    """Add ``quarantine`` and its actions to the command line."""
    parser = subparsers.add_parser(
        "quarantine", help="inspect, release, resolve and replay refused messages"
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        add_inbox_target(p, "inbox")
        add_json(p)

    listing = actions.add_parser("list", help="quarantine records, oldest first")
    common(listing)
    listing.add_argument("--consumer", help="only this consumer's records")
    listing.add_argument("--status", choices=_STATUSES, default="open", help="default: open")
    listing.add_argument("--limit", type=positive_int, default=100, metavar="N")
    listing.add_argument(
        "--after", type=positive_int, metavar="ID", help="the page after this record ID"
    )
    listing.set_defaults(func=_command(_list, read_only=True))

    show = actions.add_parser(
        "show", help="one record with the refused message's details and its audit trail"
    )
    common(show)
    show.add_argument(
        "id", type=positive_int, metavar="ID", help="the record's ID (see: quarantine list)"
    )
    show.set_defaults(func=_command(_show, read_only=True))

    for name, helptext in (
        ("release", "let the command be processed again: delete the evidence that refused it"),
        ("resolve", "mark an open record handled; the evidence is untouched"),
    ):
        p = actions.add_parser(name, help=helptext)
        common(p)
        p.add_argument(
            "id", type=positive_int, metavar="ID", help="the record's ID (see: quarantine list)"
        )
        p.add_argument("--reason", required=True, help=f"why it is {name}d (recorded)")
        p.add_argument("--by", help="who acts (default: the OS user; recorded)")
        p.set_defaults(func=_command(_settle, read_only=False), settle=name)

    replay = actions.add_parser(
        "replay", help="publish a refused message again through a transport, and record it"
    )
    common(replay)
    replay.add_argument(
        "id", type=positive_int, metavar="ID", help="the record's ID (see: quarantine list)"
    )
    replay.add_argument(
        "--transport",
        required=True,
        help="module:name of an outbox transport, or of a zero-argument factory returning one",
    )
    replay.add_argument("--reason", required=True, help="why it is replayed (recorded)")
    replay.add_argument("--by", help="who replays it (default: the OS user)")
    replay.add_argument(
        "--destination", help="where to publish (default: where the message came from)"
    )
    replay.add_argument(
        "--again",
        action="store_true",
        help="replay a record that is already resolved (refused without it; recorded)",
    )
    replay.set_defaults(func=_command(_replay, read_only=False))


def _command(action: Any, *, read_only: bool) -> Any:
    def run(args: argparse.Namespace) -> int:
        return run_on_inbox("quarantine", args, action, read_only=read_only)

    return run


def _summary(record: QuarantineRecord) -> dict[str, Any]:
    shown: dict[str, Any] = plain(record)
    shown.pop("details", None)
    return shown


def _list(engine: Engine | InboxStore, args: argparse.Namespace) -> int:
    status = None if args.status == "all" else args.status
    where = {"table_prefix": args.prefix, "consumer": args.consumer, "status": status}
    records = quarantine_list(engine, limit=args.limit, after=args.after, **where)
    if args.json:
        emit_json([_summary(r) for r in records])
        return EXIT_OK
    if not records:
        print(f"no {args.status if status else ''} quarantine records".replace("  ", " "))
        return EXIT_OK
    _print_page(records, quarantine_count(engine, **where), args)
    return EXIT_OK


def _print_page(records: list[QuarantineRecord], total: int, args: argparse.Namespace) -> None:
    rows = [
        (r.id, r.consumer, r.command_id, r.reason, r.status, r.occurrences, r.last_seen_at)
        for r in records
    ]
    table(("ID", "CONSUMER", "COMMAND", "REASON", "STATUS", "SEEN", "LAST SEEN"), rows)
    more = "" if len(records) < args.limit else f"; next page: --after {records[-1].id}"
    print(f"{len(records)} shown of {total} {args.status} records{more}")


def _show(engine: Engine | InboxStore, args: argparse.Namespace) -> int:
    found = quarantine_show(engine, args.id, table_prefix=args.prefix)
    if found is None:
        return fail("quarantine", f"no record with ID {args.id}", EXIT_FOUND)
    if args.json:
        shown: dict[str, Any] = plain(found.record)
        shown["replays"] = plain(found.replays)
        shown["actions"] = plain(found.actions)
        emit_json(shown)
    else:
        _print_detail(found)
    return EXIT_OK


def _print_detail(found: QuarantineDetail) -> None:
    r = found.record
    fields(
        [
            ("id", r.id),
            ("consumer", r.consumer),
            ("command", r.command_id),
            ("reason", r.reason),
            ("status", r.status),
            ("incoming_digest", r.incoming_digest),
            ("stored_digest", r.stored_digest),
            ("first_seen_at", r.first_seen_at),
            ("last_seen_at", r.last_seen_at),
            ("occurrences", r.occurrences),
        ]
    )
    _print_message(r.details)
    for a in found.actions:
        print(f"{a.action}d by {a.actor} at {human(a.acted_at)}: {a.reason}")
        if a.evidence_digest:
            print(f"  removed evidence {a.evidence_digest} of {human(a.evidence_processed_at)}")
    for p in found.replays:
        print(
            f"replayed to {p.destination} by {p.replayed_by} at {human(p.replayed_at)}: {p.reason}"
        )


#: The parts of a kept message an operator reads first: the payload and how it came.
_FIRST = ("body", "args", "kwargs", "headers", "properties")
_PAYLOAD = frozenset({"body", "args", "kwargs"})


def _print_message(details: Mapping[str, Any] | None) -> None:
    """The message the adapter kept, one part a line as JSON; the payload
    (body, arguments) whole, any other mapping one entry a line below its name."""
    if not details:
        print("message: not kept (the guard was given no details=)")
        return
    print("message:")
    order = [k for k in _FIRST if k in details] + sorted(k for k in details if k not in _FIRST)
    for key in order:
        value = details[key]
        if isinstance(value, Mapping) and value and key not in _PAYLOAD:
            print(f"  {key}:")
            for name in sorted(value, key=str):
                print(f"    {name}: {_json(value[name])}")
        else:
            print(f"  {key}: {_json(value)}")


def _json(value: Any) -> str:
    return json.dumps(plain(value), sort_keys=True, default=str, ensure_ascii=False)


def _settle(engine: Engine | InboxStore, args: argparse.Namespace) -> int:
    recorded_text(args, "--reason", "--by")
    if not args.reason.strip():
        raise UsageError(f"--reason must say why the record is {args.settle}d")
    settle = release_quarantine if args.settle == "release" else resolve_quarantine
    done: QuarantineAction | None = settle(
        engine, args.id, actor=args.by or _os_user(), reason=args.reason, table_prefix=args.prefix
    )
    if done is None:
        return fail("quarantine", f"no open record with ID {args.id}", EXIT_FOUND)
    if args.json:
        emit_json(done)
        return EXIT_OK
    print(f"record {done.quarantine_id} {args.settle}d by {done.actor} at {human(done.acted_at)}")
    if done.evidence_digest:
        print(
            f"removed the evidence of {done.consumer}/{done.command_id} (digest"
            f" {done.evidence_digest}): its next delivery is processed"
        )
    elif args.settle == "release":
        print("no stored evidence refused it: publish the message again to process it")
    return EXIT_OK


def _replay(engine: Engine | InboxStore, args: argparse.Namespace) -> int:
    recorded_text(args, "--reason", "--by")
    if not args.reason.strip():
        raise UsageError("--reason must say why the message is replayed")
    inbox: InboxStore
    if isinstance(engine, Engine):
        sql = open_inbox(engine, args.prefix)
        missing = missing_table(sql, sql.tables.quarantine_replays)
        if missing is not None:
            raise UsageError(f"{missing}; or run: inboxguard db upgrade")
        inbox = sql
    else:
        inbox = engine
    record = inbox.quarantine_record(args.id)
    if record is None:
        return fail("quarantine", f"no record with ID {args.id}", EXIT_FOUND)
    reason = args.reason
    if record.status != "open":
        if not args.again:
            msg = (
                f"record {args.id} is {record.status}: replaying it would publish the message"
                " again; pass --again if that is what you want (it is recorded)"
            )
            return fail("quarantine", msg, EXIT_FOUND)
        reason = f"{reason} (again: the record was {record.status})"
    try:
        message = replay_message(record, args.destination, dt.datetime.now(dt.UTC))
        transport = load_transport(args.transport)
    except ConfigurationError as error:
        raise UsageError(str(error)) from error
    try:
        receipt = transport(message)
    except Exception as error:  # the broker did not take it: nothing is recorded
        reason = f"{type(error).__name__}: {error}"
        msg = f"the transport did not publish record {args.id} ({reason}); nothing was recorded"
        return fail("quarantine", msg, EXIT_FOUND)
    finally:
        _close(transport)
    replayed = inbox.record_quarantine_replay(
        record,
        destination=message.destination,
        replayed_by=args.by or _os_user(),
        reason=reason,
        receipt=receipt,
    )
    if args.json:
        emit_json({**describe(message), "replay": plain(replayed)})
    else:
        print(
            f"record {record.id} replayed to {message.destination} by {replayed.replayed_by}"
            f" at {human(replayed.replayed_at)}"
        )
    return EXIT_OK


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in this environment
        return "unknown"


def _close(transport: Any) -> None:
    close = getattr(transport, "close", None)
    if callable(close):
        close()
