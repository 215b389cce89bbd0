"""The inbox the operator commands work on, opened from a database and a prefix."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Engine

from inboxguard import Inbox
from inboxguard.sql.dialects.postgresql.partition_periods import Granularity

__all__ = ["missing_table", "open_inbox"]

#: The command line knows no RetentionPolicy: every evidence row carries its
#: own expiry, and the commands pass their cutoffs (``now``, resolved records)
#: explicitly, so the policy of the Inbox they open is never consulted.
_UNCONSULTED_RETENTION = dt.timedelta(days=1)


def open_inbox(
    engine: Engine,
    prefix: str,
    *,
    partitioning: Granularity | None = None,
    horizon: dt.timedelta | None = None,
) -> Inbox:
    """An :class:`~inboxguard.Inbox` on ``engine`` with the tables of ``prefix``
    (partitioned by expiry when ``partitioning`` is given, with ``horizon``
    deciding which partitions to create ahead).

    Raises:
        ConfigurationError: ``prefix`` is not a usable table prefix, or
            ``partitioning`` is refused.
    """
    return Inbox(
        engine,
        retention=horizon or _UNCONSULTED_RETENTION,
        table_prefix=prefix,
        partitioning=partitioning,
    )


def missing_table(inbox: Inbox, table: Table) -> str | None:
    """The message naming the fix when ``table`` is absent, else None."""
    if inspect(inbox.engine).has_table(table.name):
        return None
    return f"no table {table.name!r} at that URL; check --prefix (or run create_schema() first)"
