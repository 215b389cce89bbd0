"""Arguments several subcommands share."""

from __future__ import annotations

import argparse
import os

__all__ = ["add_database", "positive_int"]


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        msg = f"must be a positive integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_database(parser: argparse.ArgumentParser, what: str) -> None:
    """``--db`` (alias ``--url``, default ``$INBOXGUARD_DB_URL``) and ``--prefix``."""
    parser.add_argument(
        "--db",
        "--url",
        dest="db",
        default=os.environ.get("INBOXGUARD_DB_URL"),
        help=f"SQLAlchemy URL of the {what}'s database (default: $INBOXGUARD_DB_URL)",
    )
    parser.add_argument("--prefix", default="inboxguard_", help="table prefix")
