"""Arguments several subcommands share."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from inboxguard.cli._output import UsageError

__all__ = [
    "DB_ENV",
    "OLD_DB_ENV",
    "add_database",
    "add_json",
    "database_url",
    "positive_int",
    "recorded_text",
]

#: The one environment variable naming the database of every command.
DB_ENV = "INBOXGUARD_DB_URL"
#: Its older spelling, still read (with a deprecation note) when ``DB_ENV`` is unset.
OLD_DB_ENV = "INBOXGUARD_DATABASE_URL"


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


class _DeprecatedUrl(argparse.Action):
    """``--url``: the old spelling of ``--db``, accepted with a warning."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print("inboxguard: --url is deprecated; use --db (same URL)", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_database(parser: argparse.ArgumentParser, what: str = "inbox") -> None:
    """``--db`` (default ``$INBOXGUARD_DB_URL``; ``--url`` is a deprecated
    alias) and ``--prefix``."""
    parser.add_argument(
        "--db",
        dest="db",
        default=os.environ.get(DB_ENV),
        metavar="URL",
        help=f"SQLAlchemy URL of the {what}'s database (default: $INBOXGUARD_DB_URL);"
        " its password is never printed",
    )
    parser.add_argument(
        "--url", dest="db", action=_DeprecatedUrl, metavar="URL", help="deprecated: use --db"
    )
    parser.add_argument(
        "--prefix", default="inboxguard_", help="table prefix (default: inboxguard_)"
    )


def database_url(args: argparse.Namespace) -> str | None:
    """The database URL of a command: ``--db``, else ``$INBOXGUARD_DB_URL``,
    else the deprecated ``$INBOXGUARD_DATABASE_URL`` (with a note on stderr
    and a ``DeprecationWarning``)."""
    given: str | None = getattr(args, "db", None)
    if given:
        return given
    old = os.environ.get(OLD_DB_ENV)
    if old:
        note = f"${OLD_DB_ENV} is deprecated; set ${DB_ENV} instead (same URL)"
        print(f"inboxguard: {note}", file=sys.stderr)
        warnings.warn(note, DeprecationWarning, stacklevel=2)
    return old or None


def recorded_text(args: argparse.Namespace, *options: str) -> None:
    """Refuse text the audit trail would record (``--reason``, ``--by``,
    ``--note``) holding bytes that are not UTF-8: they reach Python as lone
    surrogates, which no database stores.

    Raises:
        UsageError: the first such option, with the byte's position and the fix.
    """
    for option in options:
        text = getattr(args, option.removeprefix("--").replace("-", "_"), None)
        if not isinstance(text, str):
            continue
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            msg = (
                f"{option} holds a byte that is not UTF-8 at position {error.start}; set a"
                " UTF-8 locale (LANG=C.UTF-8) or retype the text"
            )
            raise UsageError(msg) from None


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: print JSON for scripts instead of text for people."""
    parser.add_argument(
        "--json", action="store_true", help="print JSON (times ISO 8601, durations in seconds)"
    )
