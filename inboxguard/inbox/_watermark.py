"""Domain watermarks: one compact, monotonic marker per (consumer, key).

Some histories are unbounded (every billing cycle of every customer), so their
per-command evidence cannot be kept forever. When the commands of a key come
in order, one integer is enough: the highest position processed. A position at
or below it is a duplicate; a higher one advances it. The row is kept forever.

Positions are integers (signed 64-bit): a sequence number, an epoch, or a
period such as ``202611`` for November 2026. The advance runs in the caller's
transaction as a conditional write that only raises the stored position and
locks the row (PostgreSQL, SQLite: one upsert; MariaDB/MySQL: a conditional
UPDATE, then INSERT IGNORE for a new key), so concurrent advances from several
processes serialize on the row and the stored position never goes backwards.
"""

from __future__ import annotations

import datetime as dt
import functools

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Executable,
    PrimaryKeyConstraint,
    Table,
    bindparam,
    text,
)

from inboxguard._core.identity import validate_identity
from inboxguard.errors import ConfigurationError
from inboxguard.sql.schema import InboxTables, UtcDateTime, id_type

__all__ = ["advance", "statements", "watermark_table"]

_MIN, _MAX = -(2**63), 2**63 - 1


def watermark_table(tables: InboxTables) -> Table:
    """The ``<prefix>watermark`` table, on the inbox's MetaData."""
    name = tables.inbox.name.removesuffix("inbox") + "watermark"
    existing = tables.metadata.tables.get(name)
    if existing is not None:
        return existing
    return Table(
        name,
        tables.metadata,
        Column("consumer", id_type(), nullable=False),
        Column("key", id_type(), nullable=False),
        Column("position", BigInteger, nullable=False),
        Column("updated_at", UtcDateTime(), nullable=False),
        PrimaryKeyConstraint("consumer", "key"),
    )


def advance(
    conn: Connection, table: Table, *, consumer: str, key: str, position: int, now: dt.datetime
) -> bool:
    """Raise the watermark of (``consumer``, ``key``) to ``position``.

    Returns True when it advanced (or was created), False when ``position`` is
    at or below the stored one (a duplicate).
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
    stmts = statements(table, conn.dialect.name)
    if len(stmts) == 1:  # PostgreSQL, SQLite: one conditional upsert
        return conn.execute(stmts[0], values).first() is not None
    raise_, insert_ignore = stmts
    # MariaDB/MySQL: a conditional UPDATE (a locking current read), then, when
    # nothing matched, INSERT IGNORE; if the insert lost a race, the UPDATE once
    # more against the row that now exists. The driver reports *matched* rows and
    # the WHERE only matches a lower position, so 1 means it advanced. (ON
    # DUPLICATE KEY UPDATE cannot tell "inserted" from "unchanged" under that flag.)
    if conn.execute(raise_, values).rowcount:
        return True
    if conn.execute(insert_ignore, values).rowcount:
        return True
    return bool(conn.execute(raise_, values).rowcount)


@functools.cache
def statements(table: Table, dialect_name: str) -> tuple[Executable, ...]:
    """The advance's statements for one table and database, built once.

    Written so that SQLAlchemy caches their compiled form (its dialect-specific
    ``insert()`` constructs are recompiled on every execution).
    """
    updated_at = bindparam("updated_at", type_=UtcDateTime())
    if dialect_name in {"postgresql", "sqlite"}:
        # The table name is built from a validated prefix; every value is bound.
        upsert = text(
            f'INSERT INTO {table.name} (consumer, "key", position, updated_at)'  # noqa: S608
            " VALUES (:consumer, :key, :position, :updated_at)"
            ' ON CONFLICT (consumer, "key") DO UPDATE'
            " SET position = excluded.position, updated_at = excluded.updated_at"
            f" WHERE {table.name}.position < excluded.position"
            " RETURNING position"  # a row only when inserted or advanced
        ).bindparams(updated_at)
        return (upsert,)
    raise_ = text(
        f"UPDATE {table.name} SET position = :position, updated_at = :updated_at"  # noqa: S608
        " WHERE consumer = :consumer AND `key` = :key AND position < :position"
    ).bindparams(updated_at)
    insert_ignore = text(
        f"INSERT IGNORE INTO {table.name} (consumer, `key`, position, updated_at)"  # noqa: S608
        " VALUES (:consumer, :key, :position, :updated_at)"
    ).bindparams(updated_at)
    return raise_, insert_ignore
