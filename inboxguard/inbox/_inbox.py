"""The transactional inbox: one commit per business command, in the caller's
own database transaction.

:class:`Inbox` is the public face; it owns small private collaborators and
delegates to them: the guard's flow (:mod:`._flow`) run by a sync or an async
driver (:mod:`._drive`), the quarantine store, and the upkeep (purge and
watermarks).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard._core.extract import CommandIdSpec
from inboxguard._core.guarantee import Guarantee, Setting
from inboxguard._core.retention import RetentionPolicy
from inboxguard._telemetry import check_switch, telemetry_for
from inboxguard.errors import ConfigurationError
from inboxguard.inbox._batch import BatchCommand, InboxBatch
from inboxguard.inbox._batch_drive import drive_batch_async, drive_batch_sync
from inboxguard.inbox._batch_flow import BatchFlows
from inboxguard.inbox._drive import drive_async, drive_sync, quarantine_async, quarantine_sync
from inboxguard.inbox._flow import GuardFlows
from inboxguard.inbox._handlers import SentAtSpec, async_handler, registering, sync_handler
from inboxguard.inbox._inspection import lookup_evidence
from inboxguard.inbox._maintenance import Maintenance, ResolvedCutoff
from inboxguard.inbox._partitioning import (
    DEFAULT_AHEAD,
    Partitions,
    batch_on_partitions_error,
    check_layout,
)
from inboxguard.inbox._purge import Progress, PurgePlan, PurgeReport
from inboxguard.inbox._quarantine import (
    QuarantineAction,
    QuarantineReplay,
    QuarantineStore,
    audited,
)
from inboxguard.inbox._records import InboxEntry, InboxRecord, QuarantineReason, QuarantineRecord
from inboxguard.inbox._settings import DEFAULT_LOCK_TIMEOUT, check_settings, warn_about_pool
from inboxguard.inbox._store import StoreCapabilities
from inboxguard.sql.dialects.postgresql.partitions import Granularity, check_granularity
from inboxguard.sql.errors import INBOX_SCHEMA
from inboxguard.sql.schema import check_tables
from inboxguard.sql.tables import inbox_tables

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

__all__ = ["Inbox"]

R = TypeVar("R")
#: What a SQL inbox can do, unpartitioned and partitioned.
_PLAIN = StoreCapabilities(
    store="sql",
    local="db",
    transaction="session",
    async_guard=True,
    async_sessions=True,
    batch=True,
    partitioning=False,
)
_PARTITIONED = dataclasses.replace(_PLAIN, batch=False, partitioning=True)
#: What ``guard_batch(commands=...)`` takes.
BatchCommands = Iterable["BatchCommand | tuple[str, object]"] | Mapping[str, object]


class Inbox:
    """Records each business command once, in the caller's transaction.

    The evidence row (consumer, command ID, payload digest) commits if and only
    if the caller's transaction commits, so a command's effects and the record
    that they happened cannot disagree.

    Args:
        engine: the database (PostgreSQL, MariaDB/MySQL or SQLite). Quarantine
            records are written through it in transactions of their own.
        retention: a :class:`RetentionPolicy`, or a ``timedelta`` meaning one
            window with no margin. Evidence is kept for its horizon.
        table_prefix: prefix of the inbox's tables.
        lock_timeout: how long a claim waits for another transaction holding
            the same command before :class:`InProgressError`; ``None`` waits
            as long as the database does.
        clock: zero-argument callable returning an aware datetime (default:
            UTC now); tests move time with it.
        telemetry: record OpenTelemetry metrics and spans (claims by outcome,
            claim, handler and commit spans) when ``opentelemetry-api`` is
            installed; ``False`` turns them off for this inbox.
        partitioning: PostgreSQL only, opt-in: ``"daily"``, ``"weekly"`` or
            ``"monthly"`` range partitions of the evidence by expiry, created
            ahead by :meth:`create_partitions` (and every :meth:`purge`) and
            dropped whole by :meth:`purge`; guarded transactions must run at
            READ COMMITTED (see docs/scaling.md).

    Raises:
        ConfigurationError: an argument cannot keep the guarantees.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        retention: RetentionPolicy | dt.timedelta,
        table_prefix: str = "inboxguard_",
        lock_timeout: dt.timedelta | None = DEFAULT_LOCK_TIMEOUT,
        clock: Clock | None = None,
        telemetry: bool = True,
        partitioning: Granularity | None = None,
    ) -> None:
        check_settings(engine, table_prefix, lock_timeout, clock)
        granularity = check_granularity(partitioning, table_prefix)
        check_switch("telemetry", telemetry)
        warn_about_pool(engine)
        self.engine = engine
        self.retention = RetentionPolicy.coerce(retention)
        self.table_prefix = table_prefix
        self.lock_timeout = lock_timeout
        self.clock: Clock = clock or utc_now
        self.tables = inbox_tables(table_prefix)
        self.telemetry = telemetry
        self.partitioning = granularity
        self._partitions = (
            None
            if granularity is None
            else Partitions(engine, self.tables, granularity, self.retention, self.clock)
        )
        self._flows = GuardFlows(
            self.tables,
            self.retention,
            self.clock,
            lock_timeout,
            telemetry=telemetry_for(telemetry),
            partitioned=granularity is not None,
        )
        self._quarantine = QuarantineStore(engine, self.tables)
        self._upkeep = Maintenance(
            engine, self.tables, self.retention, self.clock, self._partitions
        )

    def __repr__(self) -> str:
        """Show the database, prefix and retention."""
        return (
            f"<Inbox {self.engine.url.render_as_string()} {self.table_prefix!r} {self.retention}>"
        )

    @property
    def capabilities(self) -> StoreCapabilities:
        """A SQL store: sessions (sync and async), batch claims unless
        partitioned (see :class:`~inboxguard.StoreCapabilities`)."""
        return _PARTITIONED if self._partitions is not None else _PLAIN

    def transaction_boundary(self) -> tuple[str, dict[str, Setting]]:
        """The guarantee table's boundary: one transaction of this database."""
        database = self.engine.dialect.name
        table = self.tables.inbox.name
        text = (
            f"one {database} transaction: the evidence row in {table} commits with the"
            " handler's writes, or neither does"
        )
        return text, {"database": database, "inbox_table": table}

    # -- schema -------------------------------------------------------------------------

    @property
    def watermarks(self) -> Table:
        """The ``<prefix>watermark`` table (created by ``create_schema()``)."""
        return self._upkeep.watermarks

    def create_schema(self) -> None:
        """Create the inbox, quarantine and watermark tables (and the audit
        trails of operator replays and actions) if they do not exist
        (idempotent). With ``partitioning``, the inbox table is partitioned
        and its DEFAULT partition and the partitions ahead are created too.

        Raises:
            ConfigurationError: with ``partitioning``, an unpartitioned inbox
                table already exists.
        """
        if self._partitions is None:
            self.tables.metadata.create_all(self.engine, tables=self._every_table())
            return
        others = [t for t in self._every_table() if t is not self.tables.inbox]
        self.tables.metadata.create_all(self.engine, tables=others)
        self._partitions.create_schema()

    def create_partitions(
        self, *, ahead: int = DEFAULT_AHEAD, now: dt.datetime | None = None
    ) -> list[str]:
        """Create the missing partitions of a partitioned inbox, from the
        period of ``now`` (default: the inbox clock) to ``ahead`` periods past
        the expiry of a claim made then; return the names created. Every
        :meth:`purge` does this too; run either at least once per period. A
        claim whose expiry no partition covers lands in the DEFAULT
        partition, and the partition created later takes its rows over. Any
        partition lacking its unique (consumer, command_id) index gets it.

        Raises:
            ConfigurationError: the inbox has no ``partitioning``, a bad
                ``ahead``, or a partition holding a command twice (its
                unique index cannot be created).
        """
        if self._partitions is None:
            msg = "create_partitions() needs Inbox(..., partitioning='daily'|'weekly'|'monthly')"
            raise ConfigurationError(msg)
        return self._partitions.create_ahead(now=now, ahead=ahead)

    def check_schema(self) -> None:
        """Refuse a database without the inbox, quarantine or watermark table
        (adapters call it at worker start-up).

        With ``partitioning``, also refuse an inbox table that is not
        partitioned, has not its DEFAULT partition, or has a partition without
        its unique (consumer, command_id) index.

        Raises:
            ConfigurationError: a table is missing; the message names
                ``create_schema()`` and the Alembic branch that create it.
                Or the partitions are not as the claim needs them; the
                message names each partition and the fix.
        """
        check_tables(self.engine, self._own_tables(), INBOX_SCHEMA)
        check_layout(self.engine, self.tables, self._partitions)

    def drop_schema(self) -> None:
        """Drop the inbox, quarantine and watermark tables and the audit trails,
        with every record in them (and every partition of a partitioned inbox)."""
        self.tables.metadata.drop_all(self.engine, tables=self._every_table())

    def _own_tables(self) -> list[Table]:
        return [self.tables.inbox, self.tables.quarantine, self.watermarks]

    def _every_table(self) -> list[Table]:
        audit = [self.tables.quarantine_replays, self.tables.quarantine_actions]
        return [*self._own_tables(), *audit]

    # -- retention ----------------------------------------------------------------------

    def require_alignment(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Fail unless every replay window fits inside the evidence horizon.

        Adapters call this at worker start with the windows they discover,
        naming where they found them in ``source``.

        Raises:
            RetentionMisalignedError: a window is longer than the horizon.
        """
        self.retention.check(source, **windows)

    # -- the guard ----------------------------------------------------------------------

    def guard(
        self,
        session: Session | Connection,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AbstractContextManager[InboxEntry]:
        """Claim ``command_id`` for ``consumer`` inside the caller's transaction.

        Used as ``with inbox.guard(...) as entry:``.

        Yields an :class:`InboxEntry`. When ``entry.duplicate`` is false the
        block applies the command; the claim and the block's writes then commit
        or roll back together, with the caller's transaction, which the guard
        never commits. They run in a savepoint of the guard's own: when the
        block raises or is cancelled, the guard rolls it back (nothing of the
        block and no claim survive, wherever the error is caught) and re-raises
        the error; a commit inside the block is refused before it runs.
        ``sent_at`` (the message's own timestamp) refuses messages older than
        the evidence horizon; ``details`` (message
        arguments, headers) goes into any quarantine record.

        The session is checked before a stale ``sent_at`` is refused, so a
        misconfigured session fails the same way for every message.

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload (or the assigned result) has no
                canonical encoding.
            ConfigurationError: ``session`` is not a Session or Connection, or
                commits each statement on its own (autocommit, however it was
                set), or is bound to more than one engine; ``sent_at`` is not
                timezone-aware; inside the block, a commit by any route; at the
                block's exit, the transaction was committed or rolled back
                inside the block, or the database no longer knows the guard's
                savepoint (the caller's transaction is then rolled back), or
                the stored result matched no inbox row.
            PayloadMismatchError: the command was processed with another
                payload; quarantined, the block does not run.
            BeyondRetentionError: ``sent_at`` is older than the horizon;
                quarantined, the block does not run.
            InProgressError: another transaction holds the claim past
                ``lock_timeout``, or the database reported a conflict.
        """
        flow = self._flows.guard(consumer, command_id, payload, exclude, sent_at, details)
        return drive_sync(flow, session, self.engine, self._flows.telemetry)

    def guard_async(
        self,
        session: AsyncSession | AsyncConnection,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[InboxEntry]:
        """:meth:`guard` for asyncio, used as ``async with``.

        Takes a SQLAlchemy ``AsyncSession`` or ``AsyncConnection`` (asyncpg,
        aiosqlite, ...) and runs the very flow :meth:`guard` runs, with the
        same contract, decisions and order; quarantine records are written on
        another connection of the session's own ``AsyncEngine``.
        :func:`inboxguard.current_session` returns the ``AsyncSession`` inside
        the block.
        """
        flow = self._flows.guard(consumer, command_id, payload, exclude, sent_at, details)
        return drive_async(flow, session, self._flows.telemetry)

    @contextmanager
    def guard_batch(
        self,
        session: Session | Connection,
        *,
        consumer: str,
        commands: BatchCommands,
        exclude: Iterable[str] = (),
    ) -> Iterator[InboxBatch]:
        """Claim a whole batch of commands inside the caller's transaction.

        ``commands`` is an iterable of ``(command_id, payload)`` pairs or
        :class:`BatchCommand` objects (which add ``sent_at`` and ``details``
        per command), or a mapping of command ID to payload. Yields an
        :class:`InboxBatch`: one :class:`BatchEntry` per command, in input
        order, each fresh (apply it; assign ``entry.result``), duplicate
        (``entry.result`` is the stored result) or refused (``entry.error``;
        quarantined in a transaction of its own, the other entries unaffected).
        The claim takes one statement on PostgreSQL; the rows, and at the
        block's normal exit the assigned results, commit or roll back with the
        caller's transaction, which the guard never ends. An ID repeated in
        the batch is judged as a redelivery of its first entry; an empty batch
        runs no statement. ``exclude`` applies to every payload.

        Raises:
            ConfigurationError: ``commands`` or one of its elements (named by
                index) has another shape; ``session`` is not a Session or
                Connection, or autocommits; at the block's exit, the
                transaction was committed or rolled back inside the block, or
                a stored result matched no inbox row.
            InvalidCommandError: ``consumer`` or a command ID (named by index)
                is unusable; nothing is written.
            PayloadEncodingError: a payload or an assigned result has no
                canonical encoding; nothing is written.
            InProgressError: the claim met a lock held past ``lock_timeout``,
                a deadlock or a serialization failure: the whole batch is
                refused (roll back, deliver it again later).
        """
        flow = self._batches.guard_batch(consumer, commands, exclude)
        with drive_batch_sync(flow, session, self.engine) as batch:
            yield batch

    def guard_batch_async(
        self,
        session: AsyncSession | AsyncConnection,
        *,
        consumer: str,
        commands: BatchCommands,
        exclude: Iterable[str] = (),
    ) -> AbstractAsyncContextManager[InboxBatch]:
        """:meth:`guard_batch` for asyncio, used as ``async with``, with the same
        contract, decisions and statements."""
        flow = self._batches.guard_batch(consumer, commands, exclude)
        return drive_batch_async(flow, session)

    @functools.cached_property
    def _batches(self) -> BatchFlows:
        if self._partitions is not None:
            raise batch_on_partitions_error()
        return BatchFlows(
            self.tables, self.retention, self.clock, self.lock_timeout, self._flows.telemetry
        )

    def handler(
        self,
        *,
        consumer: str,
        command_id: CommandIdSpec,
        exclude: Iterable[str] = (),
        guarantee: Guarantee | None = None,
        sent_at: SentAtSpec | None = None,
    ) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorate ``fn(session, *args, **kwargs)`` so each command runs once.

        The wrapper guards the call with ``command_id`` (a callable over the
        arguments after ``session``, or the name of one) and the arguments as
        the payload. A fresh command runs ``fn`` and stores its return value;
        a duplicate returns the stored value (as decoded JSON) without
        running ``fn``. The handler is listed by
        :func:`inboxguard.guarantees_of`; ``guarantee`` declares what only you
        know (the provider, terminal states, and the delivery mode: the
        caller acks, so it cannot be derived here). ``sent_at`` (a callable
        over the same arguments, or the name of one) gives the message's own
        timestamp, as ``guard(sent_at=)`` takes it: a replay older than the
        evidence horizon is quarantined and refused.

        Raises:
            ConfigurationError: ``command_id`` or ``sent_at`` names no argument
                of ``fn``, or ``guarantee`` declares a field inboxguard derives.
        """
        exclude = tuple(exclude)
        decorate = sync_handler(
            self.guard, consumer=consumer, command_id=command_id, exclude=exclude, sent_at=sent_at
        )
        return registering(
            self, "Inbox.handler", decorate, consumer, command_id, exclude, guarantee
        )

    def handler_async(
        self,
        *,
        consumer: str,
        command_id: CommandIdSpec,
        exclude: Iterable[str] = (),
        guarantee: Guarantee | None = None,
        sent_at: SentAtSpec | None = None,
    ) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
        """:meth:`handler` for ``async def fn(session, *args, **kwargs)`` (an AsyncSession)."""
        exclude = tuple(exclude)
        decorate = async_handler(
            self.guard_async,
            consumer=consumer,
            command_id=command_id,
            exclude=exclude,
            sent_at=sent_at,
        )
        return registering(
            self, "Inbox.handler_async", decorate, consumer, command_id, exclude, guarantee
        )

    # -- quarantine -----------------------------------------------------------------------

    def quarantine_delivery(
        self,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        reason: QuarantineReason | str,
        exclude: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """Refuse a delivery durably: write (or count again) its quarantine record.

        The record is written in a transaction of its own, so it survives the
        caller's rollback. Adapters call this when a command's retries are
        exhausted, before the broker dead-letters it. Returns False when the
        record could not be written, or the engine's pool had no connection
        of its own to give (it shares the caller's connection, or none is
        free): the whole record is then logged at ERROR, without waiting.

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload has no canonical encoding.
        """
        request = self._flows.quarantine(consumer, command_id, payload, reason, exclude, details)
        return quarantine_sync(request, self.engine)

    async def quarantine_delivery_async(
        self,
        engine: AsyncEngine,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        reason: QuarantineReason | str,
        exclude: Iterable[str] = (),
        details: Mapping[str, Any] | None = None,
    ) -> bool:
        """:meth:`quarantine_delivery` through an ``AsyncEngine`` on the same database."""
        request = self._flows.quarantine(consumer, command_id, payload, reason, exclude, details)
        return await quarantine_async(request, engine)

    def quarantined(
        self,
        consumer: str | None = None,
        *,
        status: str | None = "open",
        limit: int | None = None,
        after: int | None = None,
    ) -> list[QuarantineRecord]:
        """Return quarantine records (open ones by default; ``None``: every
        status), oldest first, at most ``limit`` of them; ``after`` skips to
        the records whose id is greater (the next page after that id)."""
        return self._quarantine.records(consumer, status, limit=limit, after=after)

    def quarantine_count(self, consumer: str | None = None, *, status: str | None = "open") -> int:
        """How many quarantine records :meth:`quarantined` would list without a limit."""
        return self._quarantine.count(consumer, status)

    def quarantine_record(self, record_id: int) -> QuarantineRecord | None:
        """Return the quarantine record with this id, whatever its status, or None."""
        found = self._quarantine.records(None, None, record_id=record_id)
        return found[0] if found else None

    def quarantine_records_of(
        self, consumer: str, command_id: str, *, limit: int | None = None
    ) -> list[QuarantineRecord]:
        """Every quarantine record (any status) of one command, oldest first;
        with ``limit``, the oldest ``limit`` of them."""
        return self._quarantine.records(consumer, None, command_id=command_id, limit=limit)

    def quarantine_statuses_of(self, consumer: str, command_id: str) -> dict[str, int]:
        """How many quarantine records of one command have each status
        (``{"open": 2, "resolved": 4998}``), in one query."""
        return self._quarantine.statuses(consumer, command_id)

    async def quarantine_records_of_async(
        self, engine: AsyncEngine, consumer: str, command_id: str
    ) -> list[QuarantineRecord]:
        """:meth:`quarantine_records_of` through an ``AsyncEngine`` on the same database."""
        return await self._quarantine.records_of_async(engine, consumer, command_id)

    def resolve_quarantine(
        self, record_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        """Mark an open quarantine record resolved; False if none is open with that id.

        With ``actor`` and ``reason`` the resolution is also recorded in the
        audit trail (:meth:`quarantine_actions`), in the same transaction. The
        evidence is untouched: the command is judged as before.

        Raises:
            ConfigurationError: only one of ``actor`` and ``reason`` is given.
        """
        if actor is None and reason is None:
            return self._quarantine.resolve(record_id)
        who, why = audited(actor, reason)
        return self._quarantine.settle(record_id, "resolve", who, why, self._now()) is not None

    def release_quarantine(
        self, record_id: int, *, actor: str, reason: str
    ) -> QuarantineAction | None:
        """Let a quarantined command be processed again: mark the open record
        resolved and, for a payload mismatch, delete the stored evidence of
        the command whose digest differs from the record's incoming one,
        recording who, why and when, in one transaction.

        The next delivery of the command is then processed as fresh, whatever
        its payload, so release only what must run again. A record whose
        refusal came from no stored evidence (beyond retention, retries
        exhausted) is released with nothing to delete; its message still has
        to be published again. None when no open record has that id.

        Raises:
            ConfigurationError: ``actor`` or ``reason`` is empty.
        """
        who, why = audited(actor, reason)
        return self._quarantine.settle(record_id, "release", who, why, self._now())

    def quarantine_actions(self, record_id: int) -> list[QuarantineAction]:
        """The recorded releases and resolutions of a record, oldest first."""
        return self._quarantine.actions(record_id)

    def _now(self) -> dt.datetime:
        return checked_now(self.clock)

    def record_quarantine_replay(
        self,
        record: QuarantineRecord,
        *,
        destination: str,
        replayed_by: str,
        reason: str,
        receipt: Any = None,
    ) -> QuarantineReplay:
        """Record that an operator published ``record``'s message again (who,
        why, where, when, the transport's receipt) and mark the record resolved.
        The evidence is untouched: the replay is judged like any delivery."""
        who, why = audited(replayed_by, reason)
        values = {"destination": destination, "replayed_by": who, "reason": why}
        now = {"replayed_at": checked_now(self.clock), "receipt": receipt}
        return self._quarantine.record_replay(record, {**values, **now})

    def quarantine_replays(self, record_id: int) -> list[QuarantineReplay]:
        """The recorded replays of a quarantine record, oldest first."""
        return self._quarantine.replays(record_id)

    def quarantine_trails_of(
        self, consumer: str, command_id: str, *, through: int | None = None
    ) -> tuple[list[QuarantineReplay], list[QuarantineAction]]:
        """The replays and the actions of every quarantine record of one
        command (only those whose id is at most ``through``, when given),
        oldest first, in two queries whatever the number of records."""
        command = (consumer, command_id)
        return (
            self._quarantine.replays(None, command=command, through=through),
            self._quarantine.actions(None, command=command, through=through),
        )

    # -- evidence and upkeep --------------------------------------------------------------

    def lookup(self, consumer: str, command_id: str) -> InboxRecord | None:
        """Return the committed evidence of a command, or None."""
        return lookup_evidence(self.engine, self.tables, consumer, command_id)

    def purge(
        self,
        *,
        now: dt.datetime | None = None,
        batch_size: int = 1000,
        max_batches: int | None = None,
        progress: Progress | None = None,
        resolved_before: ResolvedCutoff = "horizon",
    ) -> PurgeReport:
        """Delete expired evidence in short batches.

        On a partitioned inbox the partitions ahead are created first, then
        every partition whose whole range has expired is detached and dropped
        (never one holding a row an open quarantine record names), and only
        the DEFAULT partition's expired rows are deleted in batches.

        Guarantees: a row whose ``expires_at`` is after ``now`` (default: the
        inbox clock) is never deleted; an open quarantine record is never
        touched; each batch is its own transaction on the purge's own
        connection; on PostgreSQL and MariaDB/MySQL rows a worker holds are
        skipped (``SKIP LOCKED``), never waited for, and only one purger runs
        at a time (another returns at once, ``acquired=False``). Stored
        results past ``result_ttl`` are nulled while their evidence stays.
        Resolved quarantine records go once last seen before
        ``resolved_before``: by default ``now`` minus the horizon; ``None``
        keeps them all. ``progress`` is called with the running report after
        each batch.

        Raises:
            ConfigurationError: a bad ``now``, ``batch_size`` or ``max_batches``.
        """
        report = self._upkeep.purge(
            now=now,
            batch_size=batch_size,
            max_batches=max_batches,
            progress=progress,
            resolved_before=resolved_before,
        )
        if report.acquired:
            tel = self._flows.telemetry
            tel.add("purge_rows", report.deleted, {"inboxguard.table": "inbox"})
            tel.add("purge_rows", report.quarantine_deleted, {"inboxguard.table": "quarantine"})
            tel.record("purge_duration", report.seconds, {})
        return report

    def purge_plan(
        self, *, now: dt.datetime | None = None, resolved_before: ResolvedCutoff = "horizon"
    ) -> PurgePlan:
        """Count what :meth:`purge` with the same arguments would delete or
        compact, changing nothing (a dry run)."""
        return self._upkeep.plan(now=now, resolved_before=resolved_before)

    def advance_watermark(
        self, session: Session | Connection, *, consumer: str, key: str, position: int
    ) -> bool:
        """Advance the watermark of (``consumer``, ``key``) in the caller's transaction.

        Returns True when ``position`` is higher than the stored one (it is
        stored, or the key is new), False when it is at or below it: a
        duplicate to skip. The write commits or rolls back with the caller's
        transaction; concurrent advances serialize on the row, so the stored
        position never goes backwards. A race on a key's very first advance
        can end in a deadlock on MariaDB/MySQL or a serialization failure on
        PostgreSQL under REPEATABLE READ; both are retryable
        (:func:`inboxguard.is_retryable`).

        Raises:
            InvalidCommandError: ``consumer`` or ``key`` is unusable.
            ConfigurationError: ``position`` is not a 64-bit int, or the
                session is in AUTOCOMMIT mode.
        """
        return self._upkeep.advance_watermark(
            session, consumer=consumer, key=key, position=position
        )
