"""Domain watermarks: one compact, monotonic marker per (consumer, key).

Some histories are unbounded (every billing cycle of every customer), so their
per-command evidence cannot be kept forever. When the commands of a key come
in order, one integer is enough: the highest position processed. A position at
or below it is a duplicate; a higher one advances it. The row is kept forever.

Positions are integers (signed 64-bit): a sequence number, an epoch, or a
period such as ``202611`` for November 2026. The advance runs in the caller's
transaction as a conditional write that only raises the stored position and
locks the row (each database's statements: :mod:`inboxguard.sql.dialects`), so
concurrent advances from several processes serialize on the row and the stored
position never goes backwards. The advance has sync callers only; its
statements are a sans-I/O sequence, run here by the sync driver.
"""

from __future__ import annotations

import datetime as dt
import functools

from sqlalchemy import Connection, Table

from inboxguard._core.identity import validate_identity
from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects import Database, Watermark, database_for, drive
from inboxguard.sql.errors import INBOX_SCHEMA, schema_required

__all__ = ["advance"]

_MIN, _MAX = -(2**63), 2**63 - 1


def advance(
    conn: Connection, table: Table, *, consumer: str, key: str, position: int, now: dt.datetime
) -> bool:
    """Raise the watermark of (``consumer``, ``key``) to ``position``.

    Returns True when it advanced (or was created), False when ``position`` is
    at or below the stored one (a duplicate).

    Raises:
        InvalidCommandError: ``consumer`` or ``key`` is unusable.
        ConfigurationError: ``position`` is not a signed 64-bit int.
        UnsupportedDialectError: the connection's database is not supported.
    """
    validate_identity(consumer, "consumer")
    validate_identity(key, "key")
    if isinstance(position, bool) or not isinstance(position, int):
        msg = f"position must be an int (e.g. 202611 for a billing cycle), got {position!r}"
        raise ConfigurationError(msg)
    if not _MIN <= position <= _MAX:
        msg = f"position {position} does not fit a signed 64-bit integer"
        raise ConfigurationError(msg)
    values = {"consumer": consumer, "key": key, "position": position, "updated_at": now}
    statements = _statements(database_for(conn.dialect), table)
    with schema_required(INBOX_SCHEMA):
        return drive(conn, statements.advance(values))


@functools.cache
def _statements(database: Database, table: Table) -> Watermark:
    """The advance's statements for one database and table, built once."""
    return database.watermark(table)
