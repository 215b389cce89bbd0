"""``inboxguard stats``: per consumer, the evidence and the open quarantine;
the outbox backlog; the effect ledger by state.

    inboxguard stats [--db URL] [--prefix P] [--json]
    inboxguard stats --redis URL [--key-prefix P] [--json]

Read-only. A part whose tables are absent is shown as such, not an error.
For a RedisInbox: evidence and open records per consumer, and the durability
the server reports (the outbox and ledger live in SQL).
"""

from __future__ import annotations

import argparse
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard import InboxStore, stats
from inboxguard.cli._args import add_json
from inboxguard.cli._command import run_on_inbox
from inboxguard.cli._output import EXIT_OK, emit_json, fields, table
from inboxguard.cli._redis import add_inbox_target
from inboxguard.operations import Stats

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``stats``."""
    parser = subparsers.add_parser(
        "stats",
        help="evidence and quarantine per consumer, outbox backlog, effects by state",
        description="Per consumer: processed evidence rows, open quarantine records and the"
        " age of the oldest evidence; the outbox backlog and its oldest unsent row; effects"
        " by state and the oldest unknown one; for a RedisInbox (--redis), the server's"
        " durability instead of the outbox and ledger. Reads only.",
    )
    add_inbox_target(parser)
    add_json(parser)
    parser.set_defaults(func=lambda args: run_on_inbox("stats", args, _run, read_only=True))


def _run(engine: Engine | InboxStore, args: argparse.Namespace) -> int:
    found = stats(engine, table_prefix=args.prefix)
    if args.json:
        emit_json(found)
    else:
        _print(found)
    return EXIT_OK


def _print(found: Stats) -> None:
    fields([("at", found.at), ("prefix", found.table_prefix)])
    print("\ninbox")
    if found.consumers is None:
        print(f"  no inbox tables with prefix {found.table_prefix!r}")
    elif not found.consumers:
        print("  no evidence and no quarantine yet")
    else:
        rows = [
            (c.consumer, c.processed, c.quarantined, c.oldest_processed_at, c.oldest_evidence_age)
            for c in found.consumers
        ]
        table(("CONSUMER", "PROCESSED", "QUARANTINED", "OLDEST EVIDENCE", "AGE"), rows)
    if found.durability is not None:
        _print_durability(found.durability)
        return
    print("\noutbox")
    if found.outbox is None:
        print("  no outbox table")
    else:
        o = found.outbox
        fields(
            [
                ("  backlog", o.backlog),
                ("  oldest unsent", o.oldest_unsent_at),
                ("  oldest unsent age", o.oldest_unsent_age),
                ("  dead", o.dead),
                ("  delivered (kept)", o.delivered),
            ]
        )
    print("\neffects")
    if found.effects is None:
        print("  no effect ledger tables")
    else:
        e = found.effects
        counts: list[tuple[str, object]] = [(f"  {s}", n) for s, n in e.by_state.items()]
        oldest = [("  oldest unknown", e.oldest_unknown_at), ("  its age", e.oldest_unknown_age)]
        fields([*counts, *oldest])


def _print_durability(durability: dict[str, object]) -> None:
    print("\nredis server")
    names = ("maxmemory_policy", "appendonly", "appendfsync", "save", "role", "replicas")
    fields([(f"  {name}", durability.get(name)) for name in names])
    print(f"  {durability.get('summary')}")
    print("\noutbox and effects: not in Redis (they live in SQL: see --db)")
