"""``inboxguard purge``: delete expired evidence in batches, with a progress
bar and a summary. ``--dry-run`` only counts."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, DBAPIError

from inboxguard import ConfigurationError, PurgeReport
from inboxguard.cli._args import positive_int
from inboxguard.cli._duration import parse_duration
from inboxguard.cli._inbox import missing_table, open_inbox

__all__ = ["ProgressBar", "register"]


def register(subparsers: Any) -> None:
    """Add ``purge``."""
    parser = subparsers.add_parser("purge", help="delete expired inbox evidence in batches")
    parser.add_argument("--url", required=True, help="SQLAlchemy database URL of the inbox")
    parser.add_argument("--prefix", default="inboxguard_", help="table prefix of the inbox")
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would go; change nothing"
    )
    parser.add_argument("--batch-size", type=positive_int, default=1000, metavar="N")
    parser.add_argument("--max-batches", type=positive_int, default=None, metavar="N")
    parser.add_argument(
        "--resolved-older-than",
        type=parse_duration,
        default=None,
        metavar="DURATION",
        help="also delete RESOLVED quarantine records last seen before this (default: keep);"
        " open ones are never deleted",
    )
    parser.set_defaults(func=_purge)


def _purge(args: argparse.Namespace) -> int:
    try:
        engine = create_engine(args.url)
    except (ArgumentError, ImportError) as error:
        print(f"inboxguard purge: --url {args.url!r} is not usable: {error}", file=sys.stderr)
        return 2
    try:
        return _purge_with(engine, args)
    except DBAPIError as error:
        print(f"inboxguard purge: the database refused: {error.orig}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()


def _purge_with(engine: Engine, args: argparse.Namespace) -> int:
    try:
        inbox = open_inbox(engine, args.prefix)
    except ConfigurationError as error:
        print(f"inboxguard purge: --prefix: {error}", file=sys.stderr)
        return 2
    missing = missing_table(inbox, inbox.tables.inbox)
    if missing is not None:
        print(f"inboxguard purge: {missing}", file=sys.stderr)
        return 2
    now = inbox.clock()
    before = now - args.resolved_older_than if args.resolved_older_than is not None else None
    plan = inbox.purge_plan(now=now, resolved_before=before)
    if args.dry_run:
        print(
            f"dry run: {plan.expired} expired rows, {plan.results_due} results past their"
            f" TTL, {plan.quarantine_due} resolved quarantine records would be purged"
        )
        return 0
    bar = ProgressBar(plan.expired + plan.results_due + plan.quarantine_due, sys.stderr)
    report = inbox.purge(
        now=now,
        batch_size=args.batch_size,
        max_batches=args.max_batches,
        progress=bar.update,
        resolved_before=before,
    )
    bar.finish()
    print(report.summary())
    return 0


class ProgressBar:
    """A one-line bar on a terminal; a line every few seconds otherwise."""

    WIDTH = 30

    def __init__(self, total: int, out: TextIO) -> None:
        self.total = max(total, 1)
        self.out = out
        self.tty = out.isatty()
        self.last = 0.0

    def update(self, report: PurgeReport) -> None:
        """Redraw with the running report."""
        done = report.deleted + report.results_dropped + report.quarantine_deleted
        share = min(done / self.total, 1.0)
        filled = int(share * self.WIDTH)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        line = f"[{bar}] {share:4.0%} {done}/{self.total} rows, {report.batches} batches"
        if self.tty:
            self.out.write("\r" + line)
            self.out.flush()
        elif time.monotonic() - self.last >= 2.0:
            self.last = time.monotonic()
            print(line, file=self.out, flush=True)

    def finish(self) -> None:
        """End the bar's line."""
        if self.tty:
            self.out.write("\n")
            self.out.flush()
