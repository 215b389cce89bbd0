"""``inboxguard purge``: delete expired evidence in batches, with a progress
bar (on a terminal's stderr only) and a summary. ``--dry-run`` only counts
(and, being a read, never creates a SQLite file)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from sqlalchemy.engine import Engine

from inboxguard import ConfigurationError, PurgeReport
from inboxguard.cli._args import add_database, add_json, positive_int
from inboxguard.cli._command import run_on_database
from inboxguard.cli._duration import parse_duration
from inboxguard.cli._inbox import missing_table, open_inbox
from inboxguard.cli._output import EXIT_FOUND, EXIT_OK, UsageError, emit_json, plain
from inboxguard.sql.dialects.postgresql.partition_periods import GRANULARITIES

__all__ = ["ProgressBar", "register"]


def register(subparsers: Any) -> None:
    """Add ``purge``."""
    parser = subparsers.add_parser(
        "purge",
        help="delete expired inbox evidence in batches",
        description="Delete expired evidence (and results past their TTL) in short batches,"
        " with a progress bar on a terminal's stderr. --dry-run only counts.",
    )
    add_database(parser, "inbox")
    add_json(parser)
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
    parser.add_argument(
        "--partitioning",
        choices=GRANULARITIES,
        default=None,
        help="the inbox table is partitioned by expiry with this granularity (PostgreSQL):"
        " drop whole expired partitions and create the ones ahead; needs --horizon",
    )
    parser.add_argument(
        "--horizon",
        type=parse_duration,
        default=None,
        metavar="DURATION",
        help="with --partitioning: the inbox's evidence horizon, so the partitions ahead"
        " cover the expiry of a claim made now (e.g. 30d)",
    )
    parser.set_defaults(
        func=lambda args: run_on_database("purge", args, _purge, read_only=args.dry_run)
    )


def _purge(engine: Engine, args: argparse.Namespace) -> int:
    if (args.partitioning is None) != (args.horizon is None):
        msg = "--partitioning and --horizon go together, e.g. --partitioning daily --horizon 30d"
        raise UsageError(msg)
    inbox = open_inbox(engine, args.prefix, partitioning=args.partitioning, horizon=args.horizon)
    missing = missing_table(inbox, inbox.tables.inbox)
    if missing is not None:
        raise UsageError(missing)
    try:
        inbox.check_schema()
    except ConfigurationError as error:
        raise UsageError(_in_flags(str(error))) from error
    now = inbox.clock()
    before = now - args.resolved_older_than if args.resolved_older_than is not None else None
    plan = inbox.purge_plan(now=now, resolved_before=before)
    if args.dry_run:
        if args.json:
            emit_json({"dry_run": True, "at": now, **plain(plan)})
        else:
            print(
                f"dry run: {plan.expired} expired rows, {plan.results_due} results past their"
                f" TTL, {plan.quarantine_due} resolved quarantine records would be purged"
            )
        return EXIT_OK
    bar = ProgressBar(plan.expired + plan.results_due + plan.quarantine_due, sys.stderr)
    report = inbox.purge(
        now=now,
        batch_size=args.batch_size,
        max_batches=args.max_batches,
        progress=bar.update,
        resolved_before=before,
    )
    bar.finish()
    if args.json:
        emit_json({"dry_run": False, "at": now, **plain(report)})
    else:
        print(report.summary())
    return EXIT_OK if report.acquired else EXIT_FOUND  # another purger held the lock


def _in_flags(message: str) -> str:
    """A layout refusal in the command line's words: flags, not Inbox(...)."""
    api = "Inbox(..., partitioning=<the granularity it was created with>), e.g. 'daily'"
    flags = (
        "--partitioning <the granularity it was created with> --horizon <its evidence"
        " horizon>, e.g. --partitioning daily --horizon 30d"
    )
    return message.replace(api, flags).replace("partitioning=...", "--partitioning")


class ProgressBar:
    """A one-line bar redrawn on a terminal; nothing when ``out`` is not one
    (a log file or a pipe gets the summary only)."""

    WIDTH = 30

    def __init__(self, total: int, out: TextIO) -> None:
        self.total = max(total, 1)
        self.out = out
        self.tty = out.isatty()

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

    def finish(self) -> None:
        """End the bar's line."""
        if self.tty:
            self.out.write("\n")
            self.out.flush()
