"""MariaDB and MySQL purge statements.

Features:

- one purger across instances: ``GET_LOCK(name, 0)``, named after the current
  database and the table.
- rows a worker holds are skipped: a ``SKIP LOCKED`` read of the keys, then
  one write per picked row by its full primary key.
- no gap locks that would block inserts: batches run at READ COMMITTED.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, select, text, update
from sqlalchemy.sql import ColumnElement, Select

from inboxguard.sql.dialects.base.purge import PurgeStatements

__all__ = ["MysqlPurge"]


class MysqlPurge(PurgeStatements):
    """MariaDB/MySQL: ``GET_LOCK``, and a ``SKIP LOCKED`` read of the keys, then
    one write per picked row by its full primary key (MySQL cannot write a table
    it reads in a subquery)."""

    single_purger = True
    skips_locked_rows = True
    isolation_level = "READ COMMITTED"

    #: ``GET_LOCK`` names are server-wide and at most 64 characters: the name
    #: hashes the current database with the table, so inboxes with the same prefix
    #: in two databases of one server do not exclude each other.
    _LOCK = (
        "CONCAT('inboxguard:', LEFT(SHA2(CONCAT(COALESCE(DATABASE(), ''), '/', :name), 256), 48))"
    )

    def try_lock(self, conn: Connection) -> bool:
        """``GET_LOCK(name, 0)``: session-level, returns at once."""
        stmt = text(f"SELECT GET_LOCK({self._LOCK}, 0)")
        return conn.execute(stmt, {"name": self.lock_name_on(conn)}).scalar() == 1

    def unlock(self, conn: Connection) -> None:
        """``RELEASE_LOCK``."""
        stmt = text(f"SELECT RELEASE_LOCK({self._LOCK})")
        conn.execute(stmt, {"name": self.lock_name_on(conn)})

    def drop_results(
        self, conn: Connection, now: dt.datetime, n: int, after: dt.datetime | None
    ) -> tuple[int, dt.datetime | None]:
        """Null up to ``n`` results past their TTL: pick and lock, then write by key."""
        c = self.tables.inbox.c
        due = (c.result_expires_at <= now) & c.result.is_not(None)
        if after is not None:
            due = due & (c.result_expires_at >= after)
        picked = self._pick(
            select(c.consumer, c.command_id, c.result_expires_at).where(due), c.result_expires_at, n
        )
        rows = conn.execute(picked).all()
        if rows:
            stmt = update(self.tables.inbox).where(*_by_key([c.consumer, c.command_id]))
            conn.execute(stmt.values(result=None), _key_params(row[:2] for row in rows))
        return len(rows), max((r.result_expires_at for r in rows), default=after)

    def _delete(
        self,
        conn: Connection,
        picked: Select[Any],
        key: list[Any],
        condition: ColumnElement[bool],
    ) -> int:
        # The picked rows are locked by the read until the batch commits, so they
        # still meet the condition. One full-key DELETE per row (sent as
        # executemany): InnoDB may answer a multi-key IN, or a repeated condition,
        # with a scan that waits on rows workers hold; a full key locks one row.
        rows = conn.execute(picked).all()
        if rows:
            conn.execute(delete(key[0].table).where(*_by_key(key)), _key_params(rows))
        return len(rows)


def _by_key(key: list[Any]) -> list[ColumnElement[bool]]:
    return [col == bindparam(f"k{i}") for i, col in enumerate(key)]


def _key_params(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    return [{f"k{i}": value for i, value in enumerate(row)} for row in rows]
