"""The transactional outbox: outgoing commands stored in the caller's own
transaction, next to the business change that requires them."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Connection, Executable
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.checks import check_clock, check_table_prefix
from inboxguard._core.clock import Clock, checked_now
from inboxguard._core.digest import canonical_json, digest_of
from inboxguard._core.headers import is_reserved
from inboxguard._core.identity import validate_identity
from inboxguard._core.retention import RetentionPolicy, format_duration
from inboxguard.errors import (
    ConfigurationError,
    OutboxPayloadConflictError,
    PayloadEncodingError,
)
from inboxguard.outbox._checks import check_positive_int
from inboxguard.outbox._records import (
    CompactionResult,
    OutboxRow,
    OutboxStatus,
)
from inboxguard.sql.clock import ServerClock
from inboxguard.sql.connection import check_engine, connection_of, refuse_shared_pool
from inboxguard.sql.dialects import OutboxStatements, database_for
from inboxguard.sql.errors import OUTBOX_SCHEMA, schema_required
from inboxguard.sql.schema import check_tables
from inboxguard.sql.tables import outbox_tables

__all__ = ["Outbox"]

#: Default time delivered rows keep their payload, headers and receipt.
DEFAULT_DELIVERED_RETENTION = dt.timedelta(days=1)
#: Default dedup horizon of the outbox's own evidence (command ID + digest).
DEFAULT_RETENTION = dt.timedelta(days=30)


#: MariaDB/MySQL refuse no statement this small (the lowest max_allowed_packet is 1 KiB
#: but the default is 16 MiB on MariaDB): below it, the server is not asked its limit.
_SMALLEST_PACKET = 1024 * 1024
#: Room for the statement around the row's values.
_STATEMENT_ROOM = 64 * 1024


class Outbox:
    """Stores outgoing commands in the caller's transaction.

    An outbox row commits if and only if the caller's business change
    commits, so a command can neither be lost after a commit (the process
    dies before it reaches the broker) nor sent for a change that rolled
    back. A :class:`~inboxguard.Dispatcher` then delivers each row at least
    once, always under its business command ID.

    Args:
        engine: the database (PostgreSQL, MariaDB/MySQL or SQLite); the same
            one the business data lives in.
        table_prefix: prefix of the outbox table (``<prefix>outbox``).
        clock: zero-argument callable returning an aware datetime; creation
            and due times and the dispatchers' leases are measured with it.
            Default: the database server's time (:class:`~inboxguard.ServerClock`),
            which every producer and dispatcher shares; pass one only in tests.
        retention: how long a delivered row's command ID and digest are kept
            (a :class:`RetentionPolicy` or a ``timedelta``). Until then, adding
            the same ID again is a no-op, or a mismatch; after it, the row is
            purged by :meth:`compact`.
        delivered_retention: how long a delivered row keeps its payload,
            headers and receipt before :meth:`compact` drops them. Not longer
            than the retention horizon.
        notify: on PostgreSQL, send a ``NOTIFY`` with each added row so a
            dispatcher started with ``wakeup=True`` reacts at commit time
            (default: on for PostgreSQL, not available elsewhere).

    Raises:
        ConfigurationError: an argument cannot keep the guarantees, or the
            engine's pool hands every checkout the same connection
            (``SingletonThreadPool``, ``StaticPool``): the outbox's own short
            transactions would run on, and commit or roll back, the caller's.
        UnsupportedDialectError: the engine's database is not supported.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        table_prefix: str = "inboxguard_",
        clock: Clock | None = None,
        retention: RetentionPolicy | dt.timedelta = DEFAULT_RETENTION,
        delivered_retention: dt.timedelta = DEFAULT_DELIVERED_RETENTION,
        notify: bool | None = None,
    ) -> None:
        check_engine(engine)
        check_table_prefix(table_prefix)
        check_clock(clock)
        self.retention = RetentionPolicy.coerce(retention)
        _check_delivered_retention(delivered_retention, self.retention)
        database = database_for(engine.dialect)
        self.tables = outbox_tables(table_prefix)
        refuse_shared_pool(engine, "an Outbox")
        self.statements: OutboxStatements = database.outbox(self.tables)
        if notify and not self.statements.supports_notify:
            msg = (
                f"notify=True needs PostgreSQL (LISTEN/NOTIFY), not {database.label};"
                " leave it unset and let the dispatcher poll"
            )
            raise ConfigurationError(msg)
        self.engine = engine
        self.table_prefix = table_prefix
        self.clock: Clock = clock or ServerClock(engine)
        self._packet: int | None = None  # MariaDB/MySQL max_allowed_packet, read once
        self.delivered_retention = delivered_retention
        self.notify = self.statements.supports_notify if notify is None else notify
        #: The LISTEN/NOTIFY channel of this outbox (PostgreSQL).
        self.channel = f"{self.tables.outbox.name}_due"

    def __repr__(self) -> str:
        """Show the database and table."""
        return f"<Outbox {self.engine.url.render_as_string()} {self.tables.outbox.name!r}>"

    # -- schema -------------------------------------------------------------------------

    def create_schema(self) -> None:
        """Create the outbox table and its indexes if they do not exist (idempotent)."""
        self.tables.metadata.create_all(self.engine)

    def check_schema(self) -> None:
        """Refuse a database without the outbox table (call it at start-up).

        Raises:
            ConfigurationError: the table is missing; the message names
                ``create_schema()`` and the Alembic branch that create it.
        """
        check_tables(self.engine, [self.tables.outbox], OUTBOX_SCHEMA)

    def drop_schema(self) -> None:
        """Drop the outbox table, with every row in it."""
        self.tables.metadata.drop_all(self.engine)

    # -- producing ----------------------------------------------------------------------

    def add(
        self,
        session: Session | Connection,
        *,
        command_id: str,
        destination: str,
        payload: object,
        headers: Mapping[str, Any] | None = None,
    ) -> bool:
        """Store a command in the caller's transaction; never commits.

        ``command_id`` comes from the business intent (see
        :func:`~inboxguard.command_id_for`), so retrying the business operation
        adds the same ID again. Returns True when a row was added, False when
        the ID was already stored with the same payload digest (a no-op).

        Raises:
            InvalidCommandError: ``command_id`` or ``destination`` is unusable.
            PayloadEncodingError: the payload or headers have no canonical
                JSON encoding, or a header name is reserved.
            OutboxPayloadConflictError: the ID is stored with a different
                payload or for another destination; nothing was written, roll
                back.
            ConfigurationError: ``session`` is not a Session or Connection,
                or commits each statement on its own (autocommit, however it
                was set: the row could outlive a rolled-back business change);
                or, on MariaDB/MySQL, the row is larger than the server's
                ``max_allowed_packet`` (nothing was written; the connection is
                still usable).
        """
        values = self._row_values(command_id, destination, payload, headers)
        conn = connection_of(
            session,
            wrong_type=(
                "add() needs the sqlalchemy Session or Connection of the business"
                " transaction, got {type}"
            ),
            row="the outbox row could commit without the business change",
        )
        self._refuse_oversized(conn, values)
        return self._store_row(conn, values, payload)

    def _refuse_oversized(self, conn: Connection, values: dict[str, Any]) -> None:
        """On MariaDB/MySQL, refuse a row the server would refuse by closing the
        connection ("server has gone away"), naming the limit instead."""
        if conn.dialect.name not in ("mysql", "mariadb"):
            return
        size = sum(len(str(v).encode("utf-8")) for v in values.values() if v is not None)
        if size < _SMALLEST_PACKET:
            return
        if self._packet is None:
            self._packet = int(conn.exec_driver_sql("SELECT @@max_allowed_packet").scalar_one())
        if size + _STATEMENT_ROOM > self._packet:
            msg = (
                f"outbox row {values['command_id']!r} is {size} bytes, more than this"
                f" server's max_allowed_packet ({self._packet} bytes), which would close"
                " the connection; nothing was written: send a smaller payload (keep a"
                " large document elsewhere and put its address in the payload) or raise"
                " max_allowed_packet on the server"
            )
            raise ConfigurationError(msg)

    def _row_values(
        self,
        command_id: str,
        destination: str,
        payload: object,
        headers: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The checked values of a new row (raises before anything is written)."""
        validate_identity(command_id, "command_id")
        validate_identity(destination, "destination")
        digest = digest_of(payload)
        return {
            "command_id": command_id,
            "destination": destination,
            "payload": canonical_json(payload),
            "headers": _encode_headers(headers),
            "digest": digest,
            "created_at": (now := checked_now(self.clock)),
            "due_at": now,
            "attempts": 0,
        }

    def _store_row(self, conn: Connection, values: dict[str, Any], payload: object) -> bool:
        """Insert the row on the caller's connection, or compare it with the
        stored one (a no-op, or a conflict); the half of :meth:`add` a store on
        another connection type (Django's) shares."""
        command_id, destination, digest = (
            values["command_id"],
            values["destination"],
            values["digest"],
        )
        st = self.statements
        with schema_required(OUTBOX_SCHEMA):  # no table: say how to create it
            added = st.add_row(conn, values)
        if added:
            if self.notify:
                conn.execute(st.notify(self.channel))
            return True
        stored, where = conn.execute(st.lookup_for_compare(), {"b_command_id": command_id}).one()
        if stored != digest:
            msg = (
                f"command {command_id!r} is already in the outbox with payload {stored},"
                f" but this call adds {digest}; nothing was written: roll back and find"
                " out why the same business intent produced a different command"
            )
            raise OutboxPayloadConflictError(
                msg, command_id=command_id, stored_digest=stored, incoming_digest=digest
            )
        if where != destination:
            msg = (
                f"command {command_id!r} is already in the outbox for destination"
                f" {where!r}, but this call adds it for {destination!r}; nothing was"
                " written: roll back and find out why the same business intent was"
                " addressed to two destinations"
            )
            raise OutboxPayloadConflictError(
                msg, command_id=command_id, stored_digest=stored, incoming_digest=digest
            )
        return False

    # -- operating ----------------------------------------------------------------------

    def status(self) -> OutboxStatus:
        """Backlog, age of the oldest unsent row, dead and delivered rows."""
        now = checked_now(self.clock)
        st = self.statements
        with schema_required(OUTBOX_SCHEMA), self.engine.connect() as conn:
            backlog, oldest = conn.execute(st.backlog_stmt).one()
            dead = conn.execute(st.count_of("dead")).scalar_one()
            done = conn.execute(st.count_of("delivered")).scalar_one()
        if oldest is not None and oldest.tzinfo is None:  # func.min loses the column type
            oldest = oldest.replace(tzinfo=dt.UTC)
        age = max(now - oldest, dt.timedelta(0)) if oldest is not None else dt.timedelta(0)
        return OutboxStatus(backlog=int(backlog), oldest_unsent_age=age, dead=dead, delivered=done)

    def get(self, command_id: str) -> OutboxRow | None:
        """Return the stored row of ``command_id``, or None."""
        return next(iter(self._rows(self.statements.rows(command_id=command_id, limit=1))), None)

    def dead(self, *, limit: int = 100) -> list[OutboxRow]:
        """Rows that exhausted their attempts, oldest first, with their last error.

        Raises:
            ConfigurationError: ``limit`` is not a positive int.
        """
        check_positive_int("limit", limit)
        return self._rows(self.statements.rows(limit=limit))

    def retry_dead(self, command_ids: Iterable[str] | None = None) -> int:
        """Make dead rows due again with a fresh attempt count (all of them,
        or those of ``command_ids``); returns how many."""
        ids = None if command_ids is None else list(command_ids)
        stmt = self.statements.retry_dead(ids, checked_now(self.clock))
        with self.engine.begin() as conn:
            return int(conn.execute(stmt).rowcount)

    def compact(self, *, batch_size: int = 1000) -> CompactionResult:
        """Drop payloads of rows delivered longer than ``delivered_retention``
        ago, and remove rows delivered longer than the retention horizon ago.

        A compacted row keeps its command ID, digest and delivery time, so
        adding the same command again stays a no-op (or a mismatch) until the
        horizon. Pending and dead rows are never touched. Work is done in
        transactions of at most ``batch_size`` rows, so a large backlog of
        old rows never holds long locks.

        Raises:
            ConfigurationError: ``batch_size`` is not a positive int.
        """
        check_positive_int("batch_size", batch_size)
        st = self.statements
        now = checked_now(self.clock)
        purge = st.purge_delivered(now - self.retention.horizon, batch_size)
        compact = st.compact_delivered(now - self.delivered_retention, now, batch_size)
        purged = self._in_batches(purge, batch_size)
        return CompactionResult(compacted=self._in_batches(compact, batch_size), purged=purged)

    def _in_batches(self, stmt: Any, batch_size: int) -> int:
        total = 0
        while True:
            with self.engine.begin() as conn:
                done = int(conn.execute(stmt).rowcount)
            total += done
            if done < batch_size:
                return total

    def _rows(self, stmt: Executable) -> list[OutboxRow]:
        with schema_required(OUTBOX_SCHEMA), self.engine.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [
            OutboxRow(
                command_id=r["command_id"],
                destination=r["destination"],
                digest=r["digest"],
                created_at=r["created_at"],
                attempts=r["attempts"],
                due_at=r["due_at"],
                delivered_at=r["delivered_at"],
                dead_at=r["dead_at"],
                last_error=r["last_error"],
                receipt=_loads(r["receipt"]),
                payload=_loads(r["payload"]),
                headers=_loads(r["headers"]) or {},
            )
            for r in rows
        ]


def _check_delivered_retention(delivered: object, retention: RetentionPolicy) -> None:
    if not isinstance(delivered, dt.timedelta) or delivered < dt.timedelta(0):
        msg = f"delivered_retention must be a non-negative timedelta, got {delivered!r}"
        raise ConfigurationError(msg)
    if delivered > retention.horizon:
        msg = (
            f"delivered_retention {format_duration(delivered)} is longer than the"
            f" retention horizon {format_duration(retention.horizon)}; a payload cannot"
            " outlive the row that holds it: shorten it or lengthen retention"
        )
        raise ConfigurationError(msg)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _encode_headers(headers: Mapping[str, Any] | None) -> str | None:
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        msg = f"headers must be a mapping of str to JSON values, got {type(headers).__name__}"
        raise PayloadEncodingError(msg, path="headers")
    taken = sorted(name for name in headers if isinstance(name, str) and is_reserved(name))
    if taken:
        msg = (
            f"headers {taken} are reserved: inboxguard's dispatchers and consumers set and"
            " act on every x-inbox header; leave them out, or rename yours"
        )
        raise PayloadEncodingError(msg, path="headers")
    return canonical_json(dict(headers), root="headers") if headers else None
