"""The Django store: :class:`DjangoInbox` (and, from :mod:`._outbox`,
:class:`DjangoOutbox`).

It keeps the contract of the library's own :class:`~inboxguard.Inbox` with
one difference: its rows are written on the connection of the caller's
``transaction.atomic()`` block instead of a SQLAlchemy session. The guard
runs the same flow as the SQLAlchemy inbox (:mod:`._driver`); what runs in
transactions of its own (quarantine records, purge, lookups) goes through a
SQLAlchemy engine on the same database
(:func:`~inboxguard.django._config.engine_for`): the inbox holds an
:class:`~inboxguard.Inbox` on that engine and hands those calls to it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Guarantee, Inbox, InboxEntry, PurgeReport, RetentionPolicy, StoreCapabilities
from inboxguard._core.clock import Clock
from inboxguard._core.extract import CommandIdSpec
from inboxguard._core.guarantee import Setting
from inboxguard._telemetry import telemetry_for
from inboxguard.django._config import check_alias, engine_for, store_settings
from inboxguard.django._driver import DJANGO_BOUNDARY, drive_django
from inboxguard.django._outbox import DjangoOutbox
from inboxguard.django._session import DjangoSession, alias_of
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import (
    InboxRecord,
    PurgePlan,
    QuarantineAction,
    QuarantineRecord,
    QuarantineReplay,
)
from inboxguard.inbox.drivers import GuardFlows, SentAtSpec, registering, sync_handler

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from inboxguard.sql.dialects.postgresql.partition_periods import Granularity

R = TypeVar("R")

__all__ = ["DjangoInbox", "DjangoOutbox", "DjangoSession"]

#: Default bound on waiting for another transaction's claim (as :class:`Inbox`).
DEFAULT_LOCK_TIMEOUT = dt.timedelta(seconds=5)
_NO_ASYNC = (
    "DjangoInbox runs on Django's synchronous connection, whose atomic() blocks are"
    " per thread; call guard() from synchronous code (in an async view, wrap it in"
    " asgiref's sync_to_async)"
)
_NO_BATCH = (
    "DjangoInbox claims one command at a time (capabilities.batch is False): call"
    " inbox.guard() for each command inside one atomic() block, or use an"
    " inboxguard.Inbox with a SQLAlchemy session for guard_batch()"
)
_NO_PARTITIONS = (
    "DjangoInbox has no partitioned layout (capabilities.partitioning is False); an"
    " inboxguard.Inbox(..., partitioning=...) partitions the evidence"
)


class DjangoInbox:
    """The inbox on Django's connection: the guard claims inside the caller's
    ``transaction.atomic()`` block, so the evidence commits if and only if the
    block's changes commit.

    Decisions, errors, quarantine records (written in a transaction of their
    own, they survive the block's rollback), retention checks and purge are
    those of :class:`~inboxguard.Inbox`, on the same tables: the store holds
    one on :attr:`engine` for everything that runs in a transaction of its
    own. What needs a SQLAlchemy session (a batch claim, ``guard_async``) it
    declares it cannot do (:attr:`capabilities`) and refuses.

    Args:
        retention: the evidence horizon (default: ``INBOXGUARD["RETENTION"]``).
        database: the Django database alias (default:
            ``INBOXGUARD["DATABASE"]``, else ``"default"``).
        table_prefix: default ``INBOXGUARD["TABLE_PREFIX"]``, else ``"inboxguard_"``.
        lock_timeout: as :class:`~inboxguard.Inbox`.
        clock: as :class:`~inboxguard.Inbox`.
        engine: the SQLAlchemy engine for transactions of the store's own
            (default: built from the alias's ``DATABASES`` entry).

    Raises:
        ConfigurationError: a setting cannot keep the guarantees.
    """

    #: Django's atomic() blocks, one command at a time, synchronous only.
    capabilities = StoreCapabilities(
        store="django",
        local="db",
        transaction="session",
        async_guard=False,
        async_sessions=False,
        batch=False,
        partitioning=False,
    )
    #: The Django store has no partitioned layout.
    partitioning: Granularity | None = None

    def __init__(
        self,
        *,
        retention: RetentionPolicy | dt.timedelta | None = None,
        database: str | None = None,
        table_prefix: str | None = None,
        lock_timeout: dt.timedelta | None = DEFAULT_LOCK_TIMEOUT,
        clock: Clock | None = None,
        engine: Engine | None = None,
        telemetry: bool = True,
    ) -> None:
        conf = store_settings(require_retention=retention is None)
        alias = check_alias(conf.database if database is None else database, "database")
        found = conf.retention if retention is None else RetentionPolicy.coerce(retention)
        assert found is not None
        self._sql = Inbox(
            engine_for(alias) if engine is None else engine,
            retention=found,
            table_prefix=conf.table_prefix if table_prefix is None else table_prefix,
            lock_timeout=lock_timeout,
            clock=clock,
            telemetry=telemetry,
        )
        self.database = alias
        self.engine = self._sql.engine
        self.tables = self._sql.tables
        self.table_prefix = self._sql.table_prefix
        self.retention = self._sql.retention
        self.lock_timeout = lock_timeout
        self.clock: Clock = self._sql.clock
        self.telemetry = telemetry
        self._flows = GuardFlows(
            self.tables,
            self.retention,
            self.clock,
            lock_timeout,
            boundary=DJANGO_BOUNDARY,
            telemetry=telemetry_for(telemetry),
        )

    def __repr__(self) -> str:
        """Show the alias, prefix and retention."""
        return f"<DjangoInbox {self.database!r} {self.table_prefix!r} {self.retention}>"

    def session(self) -> DjangoSession:
        """A :class:`DjangoSession` of this inbox's database: pass
        ``session_factory=inbox.session`` to the Celery adapter."""
        return DjangoSession(self.database)

    # -- schema and retention: the SQLAlchemy inbox's, on the same tables -----------------

    @property
    def watermarks(self) -> Table:
        """The ``<prefix>watermark`` table."""
        return self._sql.watermarks

    def create_schema(self) -> None:
        """Create the inbox's tables (see :meth:`inboxguard.Inbox.create_schema`;
        ``manage.py migrate`` creates them too)."""
        self._sql.create_schema()

    def drop_schema(self) -> None:
        """Drop the inbox's tables with every record in them."""
        self._sql.drop_schema()

    def check_schema(self) -> None:
        """Refuse a database without the inbox's tables (see
        :meth:`inboxguard.Inbox.check_schema`)."""
        self._sql.check_schema()

    def create_partitions(self, **options: Any) -> NoReturn:
        """Refused: the Django store has no partitioned layout.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_PARTITIONS)

    def require_alignment(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Fail unless every replay window fits inside the evidence horizon.

        Raises:
            RetentionMisalignedError: a window is longer than the horizon.
        """
        self._sql.require_alignment(source, **windows)

    def transaction_boundary(self) -> tuple[str, dict[str, Setting]]:
        """The guarantee table's boundary: one transaction of this database."""
        return self._sql.transaction_boundary()

    # -- the guard ------------------------------------------------------------------------

    @contextmanager
    def guard(
        self,
        session: Session | Connection | DjangoSession | None = None,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Iterator[InboxEntry]:
        """Claim ``command_id`` for ``consumer`` in the current ``atomic()`` block.

        The contract of :meth:`inboxguard.Inbox.guard`, on the connection of
        the block of this inbox's database: the claim and the block's writes
        commit or roll back together, with the block.

        Raises:
            ConfigurationError: outside ``transaction.atomic()`` (Django's
                autocommit would commit the claim alone), in a block already
                marked for rollback, or, at the block's exit, the transaction
                was committed, rolled back or marked for rollback inside it;
                and every error of :meth:`inboxguard.Inbox.guard`.
        """
        alias = alias_of(session, self.database, "inbox.guard()")
        flow = self._flows.guard(consumer, command_id, payload, exclude, sent_at, details)
        shown = session if session is not None else DjangoSession(alias)
        with drive_django(
            flow, alias, self.engine, shown, "inbox.guard()", self._flows.telemetry
        ) as entry:
            yield entry

    def guard_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: Django's atomic blocks are synchronous (see :meth:`guard`).

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_ASYNC)

    def guard_batch(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: the Django store claims one command at a time.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_BATCH)

    def guard_batch_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused, as :meth:`guard_batch`.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_BATCH)

    def handler(
        self,
        *,
        consumer: str,
        command_id: CommandIdSpec,
        exclude: Iterable[str] = (),
        guarantee: Guarantee | None = None,
        sent_at: SentAtSpec | None = None,
    ) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorate ``fn(session, *args, **kwargs)`` so each command runs once,
        in the current ``atomic()`` block (see :meth:`inboxguard.Inbox.handler`;
        call it with ``inbox.session()`` or None as the session).

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

    def handler_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused, as :meth:`guard_async`.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_ASYNC)

    # -- quarantine, evidence and upkeep: through the engine, as the SQLAlchemy inbox ------

    def quarantine_delivery(self, **record: Any) -> bool:
        """See :meth:`inboxguard.Inbox.quarantine_delivery`."""
        return self._sql.quarantine_delivery(**record)

    async def quarantine_delivery_async(self, engine: AsyncEngine, **record: Any) -> bool:
        """See :meth:`inboxguard.Inbox.quarantine_delivery_async`."""
        return await self._sql.quarantine_delivery_async(engine, **record)

    def quarantined(
        self,
        consumer: str | None = None,
        *,
        status: str | None = "open",
        limit: int | None = None,
        after: int | None = None,
    ) -> list[QuarantineRecord]:
        """See :meth:`inboxguard.Inbox.quarantined`."""
        return self._sql.quarantined(consumer, status=status, limit=limit, after=after)

    def quarantine_count(self, consumer: str | None = None, *, status: str | None = "open") -> int:
        """See :meth:`inboxguard.Inbox.quarantine_count`."""
        return self._sql.quarantine_count(consumer, status=status)

    def quarantine_record(self, record_id: int) -> QuarantineRecord | None:
        """See :meth:`inboxguard.Inbox.quarantine_record`."""
        return self._sql.quarantine_record(record_id)

    def quarantine_records_of(self, consumer: str, command_id: str) -> list[QuarantineRecord]:
        """See :meth:`inboxguard.Inbox.quarantine_records_of`."""
        return self._sql.quarantine_records_of(consumer, command_id)

    async def quarantine_records_of_async(
        self, engine: AsyncEngine, consumer: str, command_id: str
    ) -> list[QuarantineRecord]:
        """See :meth:`inboxguard.Inbox.quarantine_records_of_async`."""
        return await self._sql.quarantine_records_of_async(engine, consumer, command_id)

    def resolve_quarantine(
        self, record_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        """See :meth:`inboxguard.Inbox.resolve_quarantine`."""
        return self._sql.resolve_quarantine(record_id, actor=actor, reason=reason)

    def release_quarantine(
        self, record_id: int, *, actor: str, reason: str
    ) -> QuarantineAction | None:
        """See :meth:`inboxguard.Inbox.release_quarantine`."""
        return self._sql.release_quarantine(record_id, actor=actor, reason=reason)

    def quarantine_actions(self, record_id: int) -> list[QuarantineAction]:
        """See :meth:`inboxguard.Inbox.quarantine_actions`."""
        return self._sql.quarantine_actions(record_id)

    def record_quarantine_replay(self, record: QuarantineRecord, **replay: Any) -> QuarantineReplay:
        """See :meth:`inboxguard.Inbox.record_quarantine_replay`."""
        return self._sql.record_quarantine_replay(record, **replay)

    def quarantine_replays(self, record_id: int) -> list[QuarantineReplay]:
        """See :meth:`inboxguard.Inbox.quarantine_replays`."""
        return self._sql.quarantine_replays(record_id)

    def lookup(self, consumer: str, command_id: str) -> InboxRecord | None:
        """See :meth:`inboxguard.Inbox.lookup`."""
        return self._sql.lookup(consumer, command_id)

    def purge(self, **options: Any) -> PurgeReport:
        """See :meth:`inboxguard.Inbox.purge`."""
        return self._sql.purge(**options)

    def purge_plan(self, **options: Any) -> PurgePlan:
        """See :meth:`inboxguard.Inbox.purge_plan`."""
        return self._sql.purge_plan(**options)

    def advance_watermark(self, session: Session | Connection, **position: Any) -> bool:
        """See :meth:`inboxguard.Inbox.advance_watermark` (a SQLAlchemy session
        on :attr:`engine`)."""
        return self._sql.advance_watermark(session, **position)
