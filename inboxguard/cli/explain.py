"""``inboxguard explain CONSUMER COMMAND_ID``: why a command was, or would
be, skipped.

    inboxguard explain CONSUMER COMMAND_ID [--db URL] [--prefix P] [--limit N] [--json]
    inboxguard explain CONSUMER COMMAND_ID --redis URL [--key-prefix P] [--hash-tag T]
                       [--limit N] [--json]

Prints the verdict, the stored digest with its processing and expiry times,
the command's oldest ``--limit`` (default 100) quarantine records with
their incoming digests and the actions taken on them, how many records it
has in all (and the ``quarantine list`` command that pages through them),
the ledger's effects of the command and its outbox row. Read-only.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard import InboxStore, explain
from inboxguard.cli._args import add_json, positive_int
from inboxguard.cli._command import run_on_inbox
from inboxguard.cli._output import EXIT_OK, UsageError, emit_json, fields, human, plain
from inboxguard.cli._redis import DEFAULT_KEY_PREFIX, add_inbox_target
from inboxguard.operations import CommandExplanation

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``explain``."""
    parser = subparsers.add_parser(
        "explain",
        help="why a command was or would be skipped (evidence, quarantine, effects)",
        description="Explain the inbox's decision for one command: the stored digest with"
        " its times and expiry, each quarantine record with its incoming digest, the"
        " effects in the ledger and the outbox row. Reads only.",
    )
    parser.add_argument("consumer", metavar="CONSUMER", help="the consumer name")
    parser.add_argument("command_id", metavar="COMMAND_ID", help="the business command ID")
    add_inbox_target(parser)
    parser.add_argument(
        "--hash-tag",
        metavar="T",
        help="with --redis: the command ID's own hash tag (checked; not needed to find it)",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=100,
        metavar="N",
        help="show at most N quarantine records, the oldest (default 100; the total is shown)",
    )
    add_json(parser)
    parser.set_defaults(func=lambda args: run_on_inbox("explain", args, _run, read_only=True))


def _run(engine: Engine | InboxStore, args: argparse.Namespace) -> int:
    if args.hash_tag is not None and (
        isinstance(engine, Engine) or not engine.capabilities.hash_tags
    ):
        raise UsageError("--hash-tag is a RedisInbox's: use it with --redis")
    found = explain(
        engine,
        consumer=args.consumer,
        command_id=args.command_id,
        table_prefix=args.prefix,
        hash_tag=args.hash_tag,
        quarantine_limit=args.limit,
    )
    sql = isinstance(engine, Engine)
    rest = _rest(found, sql, args.prefix if sql else args.key_prefix or DEFAULT_KEY_PREFIX)
    if args.json:
        shown = plain(found)
        if shown["evidence"] is not None:
            # The same name as each quarantine record's; "digest" stays for old scripts.
            shown["evidence"]["stored_digest"] = shown["evidence"]["digest"]
        shown["quarantine_rest"] = rest
        emit_json(shown)
    else:
        _print(found, rest)
    return EXIT_OK


def _rest(found: CommandExplanation, sql: bool, prefix: str) -> str | None:
    """The command that pages through the records not shown, or None when all are."""
    if found.quarantine_total <= len(found.quarantine) or not found.quarantine:
        return None
    where = "--prefix" if sql else "--key-prefix"
    return (
        f"inboxguard quarantine list --consumer {shlex.quote(found.consumer)} --status all"
        f" {where} {shlex.quote(prefix)} --after {found.quarantine[-1].record.id}"
    )


def _print(found: CommandExplanation, rest: str | None) -> None:
    fields(
        [
            ("consumer", found.consumer),
            ("command", found.command_id),
            ("at", found.at),
            ("verdict", found.verdict),
        ]
    )
    print(f"\n{found.summary}\n")
    ev = found.evidence
    if ev is None:
        print("evidence: none")
    else:
        print("evidence:")
        fields(
            [
                ("  stored_digest", ev.digest),
                ("  processed_at", ev.processed_at),
                ("  expires_at", ev.expires_at),
                ("  result_expires_at", ev.result_expires_at),
            ]
        )
    if rest is None:
        print(f"\nquarantine records: {len(found.quarantine) or 'none'}")
    else:
        print(
            f"\nquarantine records: {len(found.quarantine)} shown of {found.quarantine_total}"
            f" ({found.quarantine_open} open); the rest: {rest}"
        )
    for detail in found.quarantine:
        r = detail.record
        print(f"  #{r.id} {r.reason} ({r.status}), seen {r.occurrences}x")
        fields(
            [
                ("    incoming_digest", r.incoming_digest),
                ("    stored_digest", r.stored_digest),
                ("    first_seen_at", r.first_seen_at),
                ("    last_seen_at", r.last_seen_at),
            ]
        )
        for a in detail.actions:
            print(f"    {a.action} by {a.actor} at {human(a.acted_at)}: {a.reason}")
        for p in detail.replays:
            print(f"    replayed by {p.replayed_by} at {human(p.replayed_at)}: {p.reason}")
    print(f"\neffects: {len(found.effects) or 'none'}")
    for e in found.effects:
        print(f"  {e.effect_key}: {human(e.state)} (updated {human(e.updated_at)})")
    if found.outbox is not None:
        o = found.outbox
        state = "delivered" if o.delivered_at else "dead" if o.dead_at else "pending"
        print(f"\noutbox: {state} to {o.destination}, {o.attempts} attempt(s)")
