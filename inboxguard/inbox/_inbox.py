"""The transactional inbox: one commit per business command, in the caller's
own database transaction.

:class:`Inbox` is the public face; it owns small private collaborators and
delegates to them: the guard's flow (:mod:`._flow`) run by a sync or an async
driver (:mod:`._drive`), the quarantine store, and the upkeep (purge and
watermarks). This module holds its construction and guard entry points; its
quarantine methods (:mod:`._inbox_quarantine`) and its schema and upkeep
methods (:mod:`._inbox_upkeep`) are inherited from the modules beside it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.clock import Clock, utc_now
from inboxguard._core.extract import CommandIdSpec
from inboxguard._core.guarantee import Guarantee, Setting
from inboxguard._core.retention import RetentionPolicy
from inboxguard._telemetry import check_switch, telemetry_for
from inboxguard.inbox._batch import BatchCommand, InboxBatch
from inboxguard.inbox._batch_drive import drive_batch_async, drive_batch_sync
from inboxguard.inbox._batch_flow import BatchFlows
from inboxguard.inbox._drive import drive_async, drive_sync
from inboxguard.inbox._flow import GuardFlows
from inboxguard.inbox._handlers import SentAtSpec, async_handler, registering, sync_handler
from inboxguard.inbox._inbox_quarantine import QuarantineMethods
from inboxguard.inbox._inbox_upkeep import UpkeepMethods
from inboxguard.inbox._maintenance import Maintenance
from inboxguard.inbox._partitioning import Partitions, batch_on_partitions_error
from inboxguard.inbox._quarantine import QuarantineStore
from inboxguard.inbox._records import InboxEntry
from inboxguard.inbox._settings import DEFAULT_LOCK_TIMEOUT, check_settings, warn_about_pool
from inboxguard.inbox._store import StoreCapabilities
from inboxguard.sql.dialects.postgresql.partition_periods import Granularity, check_granularity
from inboxguard.sql.tables import inbox_tables

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

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


class Inbox(QuarantineMethods, UpkeepMethods):
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
        return BatchFlows(self._flows)

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
