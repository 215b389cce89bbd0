"""The inbox the operator commands work on, opened from a database and a prefix."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Engine

from inboxguard import Inbox

__all__ = ["missing_table", "open_inbox"]

#: The command line knows no RetentionPolicy: every evidence row carries its
#: own expiry, and the commands pass their cutoffs (``now``, resolved records)
#: explicitly, so the policy of the Inbox they open is never consulted.
_UNCONSULTED_RETENTION = dt.timedelta(days=1)


def open_inbox(engine: Engine, prefix: str) -> Inbox:
    """An :class:`~inboxguard.Inbox` on ``engine`` with the tables of ``prefix``.

    Raises:
        ConfigurationError: ``prefix`` is not a usable table prefix.
    """
    return Inbox(engine, retention=_UNCONSULTED_RETENTION, table_prefix=prefix)


def missing_table(inbox: Inbox, table: Table) -> str | None:
    """The message naming the fix when ``table`` is absent, else None."""
    if inspect(inbox.engine).has_table(table.name):
        return None
    return f"no table {table.name!r} at that URL; check --prefix (or run create_schema() first)"
