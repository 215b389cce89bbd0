"""The purge's statements: the single-purger lock and one batch of each step,
shared by every database; each database's ``purge`` module refines them.

Each batch picks at most ``n`` rows that meet the condition (expired, result
past its TTL, resolved and old) and deletes (or compacts) exactly those,
addressed physically (``ctid``, ``rowid``) or by full primary key. On
PostgreSQL and SQLite the writing statement repeats the condition; on
MariaDB/MySQL the picked rows are locked by the picking read until the batch
commits, so they cannot change in between. Either way a row that does not meet
the condition is never touched, whatever runs concurrently.

=============================  ==========================  =====================  ========
                               PostgreSQL                  MariaDB / MySQL        SQLite
=============================  ==========================  =====================  ========
one purger across instances    ``pg_try_advisory_lock``    ``GET_LOCK(name, 0)``  no
rows a worker holds            skipped (``SKIP LOCKED``)   skipped (``SKIP        n/a (one
                                                           LOCKED``)              writer)
gap locks blocking inserts     none                        none (batches run at   n/a
                                                           READ COMMITTED)
statements per batch           1 (``DELETE ... WHERE       1 locking ``SELECT``,  1 (by
                               ctid = ANY(ARRAY(SELECT     then one write by      rowid)
                               ctid ... SKIP LOCKED))``)   key per row
=============================  ==========================  =====================  ========
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import Connection, delete, func, literal_column, select, update
from sqlalchemy.sql import ColumnElement, Select

from inboxguard.sql.table_text import translated_schema
from inboxguard.sql.tables import InboxTables

__all__ = ["RESOLVED", "PurgeStatements"]

#: Quarantine records purge may delete; open ones are never touched.
RESOLVED = "resolved"


class PurgeStatements:
    """The purge's statements over one prefix's inbox tables."""

    #: Only one purger runs at a time across processes and hosts: the purge
    #: takes :meth:`try_lock` first and returns at once when it is held.
    single_purger: ClassVar[bool] = False
    #: Rows locked by a worker are skipped instead of waited for.
    skips_locked_rows: ClassVar[bool] = False
    #: Isolation level each batch runs at (None: the engine's default).
    isolation_level: ClassVar[str | None] = None
    #: The column that addresses a row physically (each database sets it).
    address: ClassVar[str]

    def __init__(self, tables: InboxTables) -> None:
        self.tables = tables
        self.lock_name = f"inboxguard:purge:{tables.inbox.name}"

    def lock_name_on(self, conn: Connection) -> str:
        """The purge lock's name for the inbox table ``conn`` reaches: one lock
        per table, and per schema when a ``schema_translate_map`` moves it."""
        schema = translated_schema(conn, self.tables.inbox)
        return self.lock_name if schema is None else f"{self.lock_name}@{schema}"

    # -- the single-purger lock: held on the purge's connection for its whole run ------

    def try_lock(self, conn: Connection) -> bool:
        """Take the purge lock without waiting; True when taken.

        Raises:
            NotImplementedError: the database has no such lock
                (:attr:`single_purger` is false).
        """
        msg = "this database has no single-purger lock"
        raise NotImplementedError(msg)

    def unlock(self, conn: Connection) -> None:
        """Release the purge lock taken by :meth:`try_lock`."""
        msg = "this database has no single-purger lock"
        raise NotImplementedError(msg)

    # -- one batch of each step ----------------------------------------------------------

    def delete_expired(self, conn: Connection, now: dt.datetime, n: int) -> int:
        """Delete up to ``n`` evidence rows with ``expires_at <= now``."""
        c = self.tables.inbox.c
        expired = c.expires_at <= now
        picked = self._pick(select(c.consumer, c.command_id).where(expired), c.expires_at, n)
        return self._delete(conn, picked, [c.consumer, c.command_id], expired)

    def drop_results(
        self, conn: Connection, now: dt.datetime, n: int, after: dt.datetime | None
    ) -> tuple[int, dt.datetime | None]:
        """Null up to ``n`` results whose ``result_expires_at <= now``.

        ``after`` resumes the scan where the previous batch ended. Returns the
        count and the last ``result_expires_at`` seen.
        """
        inbox = self.tables.inbox
        c = inbox.c
        due = (c.result_expires_at <= now) & c.result.is_not(None)
        if after is not None:
            due = due & (c.result_expires_at >= after)
        picked = self._pick(select(c.consumer, c.command_id).where(due), c.result_expires_at, n)
        stmt = (
            update(inbox)
            .where(self._match(picked), due)
            .values(result=None)
            .returning(c.result_expires_at)
        )
        seen = list(conn.execute(stmt).scalars())
        return len(seen), max(seen, default=after)

    def delete_resolved_quarantine(self, conn: Connection, before: dt.datetime, n: int) -> int:
        """Delete up to ``n`` resolved quarantine records last seen at or before ``before``."""
        q = self.tables.quarantine.c
        old = (q.status == RESOLVED) & (q.last_seen_at <= before)
        picked = self._pick(select(q.id).where(old), q.id, n)
        return self._delete(conn, picked, [q.id], old)

    def oldest_expiry(self, conn: Connection) -> dt.datetime | None:
        """The earliest ``expires_at`` still stored."""
        value: dt.datetime | None = conn.execute(
            select(func.min(self.tables.inbox.c.expires_at))
        ).scalar()
        if value is not None and value.tzinfo is None:  # MIN() loses the column type on some
            value = value.replace(tzinfo=dt.UTC)
        return value

    def count(self, conn: Connection, now: dt.datetime, before: dt.datetime | None) -> list[int]:
        """What a purge at ``now`` would do: expired rows, results to drop,
        resolved quarantine records to delete."""
        c = self.tables.inbox.c
        q = self.tables.quarantine.c
        expired = select(func.count()).where(c.expires_at <= now)
        due = select(func.count()).where(
            c.result_expires_at <= now, c.result.is_not(None), c.expires_at > now
        )
        counts = [conn.execute(s).scalar_one() for s in (expired, due)]
        if before is None:
            return [*counts, 0]
        resolved = select(func.count()).where(q.status == RESOLVED, q.last_seen_at <= before)
        return [*counts, conn.execute(resolved).scalar_one()]

    # -- helpers ----------------------------------------------------------------------------

    def _pick(self, stmt: Select[Any], order: ColumnElement[Any], n: int) -> Select[Any]:
        picked = stmt.order_by(order).limit(n)
        if self.skips_locked_rows:
            picked = picked.with_for_update(skip_locked=True)
        return picked

    def _match(self, picked: Select[Any]) -> ColumnElement[bool]:
        """The picked rows, by physical address: a lookup per row, never a scan."""
        address: ColumnElement[Any] = literal_column(self.address)
        return address.in_(picked.with_only_columns(address))

    def _delete(
        self,
        conn: Connection,
        picked: Select[Any],
        key: list[Any],
        condition: ColumnElement[bool],
    ) -> int:
        stmt = delete(key[0].table).where(self._match(picked), condition)
        return int(conn.execute(stmt).rowcount)
