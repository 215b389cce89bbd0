"""Domain watermarks: one compact, monotonic marker per (consumer, key).

Some histories are unbounded (every billing cycle of every customer), so their
per-command evidence cannot be kept forever. When the commands of a key come
in order, one integer is enough: the highest position processed. A position at
or below it is a duplicate; a higher one advances it. The row is kept forever.

Positions are integers (signed 64-bit): a sequence number, an epoch, or a
period such as ``202611`` for November 2026. The advance runs in the caller's
transaction and is a single conditional write on the row, so concurrent
advances from several processes serialize on the row lock and the stored
position never goes backwards.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import BigInteger, Column, Connection, PrimaryKeyConstraint, Table, insert, update
from sqlalchemy.dialects import postgresql, sqlite

from inboxguard._command import validate_identity
from inboxguard._schema import InboxTables, UtcDateTime, id_type
from inboxguard.errors import ConfigurationError

__all__ = ["advance", "watermark_table"]

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
    name = conn.dialect.name
    if name in {"postgresql", "sqlite"}:
        return _upsert(conn, table, values)
    return _update_or_insert(conn, table, values)


def _upsert(conn: Connection, table: Table, values: dict[str, Any]) -> bool:
    """PostgreSQL and SQLite: one ``INSERT ... ON CONFLICT DO UPDATE ... WHERE``."""
    ins = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(table)
    stmt = ins.values(values).on_conflict_do_update(
        index_elements=[table.c.consumer, table.c.key],
        set_={"position": ins.excluded.position, "updated_at": ins.excluded.updated_at},
        where=table.c.position < ins.excluded.position,
    )
    # RETURNING yields a row only when the row was inserted or updated.
    return conn.execute(stmt.returning(table.c.position)).first() is not None


def _update_or_insert(conn: Connection, table: Table, values: dict[str, Any]) -> bool:
    """MariaDB/MySQL: a conditional ``UPDATE`` (a locking current read), then,
    when nothing matched, ``INSERT IGNORE``; if the insert lost a race, the
    ``UPDATE`` once more against the row that now exists.

    The driver reports *matched* rows, and the ``WHERE`` only matches a lower
    position, so a count of 1 means it advanced. (``ON DUPLICATE KEY UPDATE``
    cannot tell "inserted" from "unchanged" under that flag.)
    """
    c = table.c
    raise_ = (
        update(table)
        .where(c.consumer == values["consumer"], c.key == values["key"])
        .where(c.position < values["position"])
        .values(position=values["position"], updated_at=values["updated_at"])
    )
    if conn.execute(raise_).rowcount:
        return True
    if conn.execute(insert(table).prefix_with("IGNORE").values(values)).rowcount:
        return True
    return bool(conn.execute(raise_).rowcount)
