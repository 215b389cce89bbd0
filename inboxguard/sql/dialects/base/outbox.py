"""The outbox's statements: what every database shares, and the interface
each database's ``outbox`` module implements.

A claim leases rows: in one short transaction it picks due rows, moves
their ``due_at`` to the end of the lease, counts the attempt and stamps a
random ``lease_token``. Sending happens after that transaction committed, so
no lock is held while the broker is slow; the lease keeps other dispatchers
away until it expires.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from sqlalchemy import (
    ColumnElement,
    Connection,
    Executable,
    bindparam,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.sql.elements import TextClause

from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import OutboxTables

__all__ = ["ADD_COLUMNS", "OutboxStatements", "ReturningOutboxStatements"]

#: The columns ``Outbox.add()`` writes, in the order of its INSERT.
ADD_COLUMNS = (
    "command_id",
    "destination",
    "payload",
    "headers",
    "digest",
    "created_at",
    "due_at",
    "attempts",
)


class OutboxStatements(ABC):
    """Statements of one database for one outbox table."""

    #: More than one dispatcher may run against the same database (their
    #: claims skip each other's locked rows); else one dispatcher per database.
    concurrent_dispatchers: ClassVar[bool] = True
    #: Isolation level a claim's transaction runs at (None: the engine's).
    claim_isolation_level: ClassVar[str | None] = None
    #: A producer can wake dispatchers at commit (:meth:`notify`), and a
    #: dispatcher can LISTEN for it.
    supports_notify: ClassVar[bool] = False

    def __init__(self, tables: OutboxTables) -> None:
        t = tables.outbox
        self.table = t
        #: Columns a claim returns, in this order.
        self.claim_columns = (
            t.c.id,
            t.c.command_id,
            t.c.destination,
            t.c.payload,
            t.c.headers,
            t.c.digest,
            t.c.created_at,
            t.c.attempts,
        )
        #: The stored digest and destination of a command ID.
        self.lookup_digest: Executable = select(t.c.digest, t.c.destination).where(
            t.c.command_id == bindparam("b_command_id")
        )
        self.due_rows = (
            select(*self.claim_columns)
            .where(t.c.due_at <= bindparam("b_now"))
            .order_by(t.c.due_at)
            .limit(bindparam("b_limit"))
        )
        self.backlog_stmt: Executable = select(func.count(), func.min(t.c.created_at)).where(
            t.c.due_at.is_not(None)
        )
        self._outcome_statements()

    def _outcome_statements(self) -> None:
        """The writes that record a dispatch's outcome, each guarded so that a
        row is changed only by the lease holder (or delivered only once)."""
        t = self.table
        self.mark_delivered: Executable = (
            update(t)
            .where(t.c.id == bindparam("b_id"), t.c.delivered_at.is_(None))
            .values(
                delivered_at=bindparam("b_at"),
                receipt=bindparam("b_receipt"),
                due_at=None,
                dead_at=None,
                lease_token=None,
                last_error=None,
            )
        )
        self.mark_failed: Executable = (
            update(t)
            .where(t.c.id == bindparam("b_id"), t.c.lease_token == bindparam("b_token"))
            .values(due_at=bindparam("b_due"), last_error=bindparam("b_error"), lease_token=None)
        )
        self.mark_dead: Executable = (
            update(t)
            .where(t.c.id == bindparam("b_id"), t.c.lease_token == bindparam("b_token"))
            .values(
                due_at=None,
                dead_at=bindparam("b_at"),
                last_error=bindparam("b_error"),
                lease_token=None,
            )
        )
        # A lease given back unused (too little of it left to send safely):
        # due again at once, and the attempt it counted is returned.
        self.release: Executable = (
            update(t)
            .where(t.c.id == bindparam("b_id"), t.c.lease_token == bindparam("b_token"))
            .values(due_at=bindparam("b_due"), attempts=t.c.attempts - 1, lease_token=None)
        )

    def insert_text(self, *, verb: str = "INSERT", suffix: str = "") -> TextClause:
        """The add statement as SQL text with typed parameters.

        Text, not the dialect ``insert()`` constructs: SQLAlchemy 2.0 does not
        cache their compiled form (sqlalchemy/sqlalchemy#10445), and ``add()``
        runs in every producer transaction.
        """
        t = self.table
        columns = ", ".join(ADD_COLUMNS)
        values = ", ".join(f":{name}" for name in ADD_COLUMNS)
        sql = f"{verb} INTO {{outbox}} ({columns}) VALUES ({values}){suffix}"
        return table_text(sql, outbox=t).bindparams(
            *(bindparam(name, type_=t.c[name].type) for name in ADD_COLUMNS)
        )

    @abstractmethod
    def insert(self) -> Executable:
        """An insert of one row that does nothing when ``command_id`` exists."""

    def add_row(self, conn: Connection, values: dict[str, Any]) -> bool:
        """Insert one row unless its ``command_id`` exists; True if inserted.

        The insert returns the new row's id (a taken ID returns no row), which
        does not depend on how a driver reports row counts.
        """
        return conn.execute(self.insert(), values).first() is not None

    def lookup_for_compare(self) -> Executable:
        """The read of a stored digest and destination after an insert found the
        ID taken."""
        return self.lookup_digest

    def notify(self, channel: str) -> Executable:
        """A statement, run in the producer's transaction, that wakes the
        dispatchers listening on ``channel`` when it commits.

        Raises:
            NotImplementedError: the database has no notifications
                (:attr:`supports_notify` is false).
        """
        msg = "this database has no LISTEN/NOTIFY"
        raise NotImplementedError(msg)

    def listen(self, channel: str) -> str:
        """The driver-level statement that subscribes a connection to ``channel``.

        Raises:
            NotImplementedError: :attr:`supports_notify` is false.
        """
        msg = "this database has no LISTEN/NOTIFY"
        raise NotImplementedError(msg)

    def lease_values(self) -> dict[str, Any]:
        """The SET clause of a claim: due at the lease's end, one more attempt,
        our token."""
        t = self.table
        return {
            "due_at": bindparam("b_lease"),
            "attempts": t.c.attempts + 1,
            "lease_token": bindparam("b_token"),
        }

    def bounded_update(
        self, where: ColumnElement[bool], limit: int, values: dict[str, Any]
    ) -> Executable:
        """``UPDATE`` of at most ``limit`` rows matching ``where``."""
        t = self.table
        ids = select(t.c.id).where(where).limit(limit).scalar_subquery()
        return update(t).where(t.c.id.in_(ids)).values(values)

    def bounded_delete(self, where: ColumnElement[bool], limit: int) -> Executable:
        """``DELETE`` of at most ``limit`` rows matching ``where``."""
        t = self.table
        ids = select(t.c.id).where(where).limit(limit).scalar_subquery()
        return delete(t).where(t.c.id.in_(ids))

    # -- operator reads and upkeep (the same statements on every database) -----------

    def count_of(self, which: str) -> Executable:
        """``SELECT count(*)`` of the ``"dead"`` or the ``"delivered"`` rows."""
        column = {"dead": self.table.c.dead_at, "delivered": self.table.c.delivered_at}[which]
        return select(func.count()).where(column.is_not(None))

    def rows(self, *, command_id: str | None = None, limit: int) -> Executable:
        """Whole rows in id order: the one of ``command_id``, else the dead ones."""
        t = self.table
        where = t.c.dead_at.is_not(None) if command_id is None else t.c.command_id == command_id
        return select(t).where(where).order_by(t.c.id).limit(limit)

    def retry_dead(self, command_ids: list[str] | None, now: dt.datetime) -> Executable:
        """Dead rows (all, or those of ``command_ids``) due again at ``now``, attempts reset."""
        t = self.table
        where: ColumnElement[bool] = t.c.dead_at.is_not(None)
        if command_ids is not None:
            where = where & t.c.command_id.in_(command_ids)
        return update(t).where(where).values(dead_at=None, due_at=now, attempts=0)

    def purge_delivered(self, before: dt.datetime, limit: int) -> Executable:
        """Delete at most ``limit`` rows delivered at or before ``before``."""
        return self.bounded_delete(self.table.c.delivered_at <= before, limit)

    def compact_delivered(self, before: dt.datetime, now: dt.datetime, limit: int) -> Executable:
        """Drop payload, headers and receipt of at most ``limit`` rows delivered
        at or before ``before`` and not yet compacted."""
        t = self.table
        return self.bounded_update(
            (t.c.delivered_at <= before) & t.c.compacted_at.is_(None),
            limit,
            {"payload": None, "headers": None, "receipt": None, "compacted_at": now},
        )

    @abstractmethod
    def claim(
        self,
        conn: Connection,
        *,
        now: dt.datetime,
        lease_until: dt.datetime,
        token: str,
        limit: int,
    ) -> Sequence[Sequence[Any]]:
        """Lease up to ``limit`` due rows (oldest ``due_at`` first) inside the
        caller's transaction and return them as tuples of ``claim_columns``,
        with ``attempts`` already incremented."""


class ReturningOutboxStatements(OutboxStatements):
    """Shared by the databases whose claim is one ``UPDATE ... RETURNING``
    (PostgreSQL, SQLite): subclasses build ``_insert`` and ``_claim``."""

    _insert: Executable
    _claim: Executable

    def insert(self) -> Executable:
        """``INSERT ... ON CONFLICT (command_id) DO NOTHING RETURNING id``."""
        return self._insert

    def claim(
        self,
        conn: Connection,
        *,
        now: dt.datetime,
        lease_until: dt.datetime,
        token: str,
        limit: int,
    ) -> Sequence[Sequence[Any]]:
        """Lease in one statement, rows in id order."""
        params = {"b_now": now, "b_limit": limit, "b_lease": lease_until, "b_token": token}
        rows = conn.execute(self._claim, params).all()
        return sorted((tuple(row) for row in rows), key=lambda row: row[0])
