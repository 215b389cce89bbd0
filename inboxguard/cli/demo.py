"""``inboxguard demo``: play the failure stories against a demo billing handler.

The stories live in :mod:`inboxguard.testing.demo`, an edge of its own (it
may reach a broker through kombu); the command line loads it by name when the
subcommand runs, as it loads every subcommand, so no other command pays for it.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Any

from inboxguard.errors import ConfigurationError

__all__ = ["register"]

#: The module that plays the stories (loaded by name: see the module doc).
DEMO_MODULE = "inboxguard.testing.demo"


def register(subparsers: Any) -> None:
    """Add ``demo``."""
    parser = subparsers.add_parser(
        "demo",
        help="play the failure stories (duplicates, races, crashes, windows) on a demo handler",
        description="Play the failure stories against a demo billing handler; exit 1 when a"
        " guarantee failed.",
    )
    parser.add_argument(
        "--db", metavar="URL", help="SQLAlchemy URL (PostgreSQL, MariaDB); default: SQLite"
    )
    parser.add_argument(
        "--broker", metavar="URL", help="redis:// or amqp:// URL (kombu); default: in memory"
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stdout, format="    log: %(levelname)s %(name)s: %(message)s")
    demo = importlib.import_module(DEMO_MODULE)
    try:
        status: int = demo.run(db=args.db, broker=args.broker)
    except ConfigurationError as error:
        print(f"inboxguard demo: {error}", file=sys.stderr)
        return 2
    return status
