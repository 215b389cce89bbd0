"""The store interface: what every inbox (the SQLAlchemy :class:`~inboxguard.Inbox`,
the Django store, the :class:`~inboxguard.RedisInbox`) offers the code above it.

Adapters, operators' commands, guarantee tables and the CLI reach a store only
through :class:`InboxStore`, and choose what to do from its declared
:class:`StoreCapabilities`, never from its class. A store that cannot do
something declares it, and refuses the call with a
:class:`~inboxguard.ConfigurationError` naming what to use instead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeGuard, TypeVar, runtime_checkable

from inboxguard._core.clock import Clock
from inboxguard._core.extract import CommandIdSpec
from inboxguard._core.guarantee import Guarantee, Setting
from inboxguard._core.retention import RetentionPolicy
from inboxguard.inbox._batch import InboxBatch
from inboxguard.inbox._quarantine import QuarantineAction, QuarantineReplay
from inboxguard.inbox._records import InboxEntry, InboxRecord, QuarantineReason, QuarantineRecord

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlalchemy.ext.asyncio import AsyncEngine

    from inboxguard.sql.dialects.postgresql.partition_periods import Granularity
    from inboxguard.sql.tables import InboxTables

__all__ = ["InboxStore", "SqlInboxStore", "StoreCapabilities", "is_inbox_store", "is_sql_store"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class StoreCapabilities:
    """What one store can do, declared by the store itself.

    Attributes:
        store: the store's name, as errors and guarantee tables show it
            (``"sql"``, ``"django"``, ``"redis"``).
        local: the local layer the evidence commits in: ``"db"`` (a database
            transaction) or ``"redis"`` (one ``MULTI``/``EXEC``).
        transaction: what a delivery's local transaction is: ``"session"``
            (the caller begins a session, ``session.begin()``; a Django
            session's ``begin()`` is ``atomic()``) or ``"pipeline"`` (a
            transactional pipeline whose ``EXEC`` the guard sends).
        async_guard: ``guard_async`` and ``handler_async`` work.
        async_sessions: the guard runs in a SQLAlchemy ``AsyncSession`` and
            quarantine records go through an ``AsyncEngine``
            (``quarantine_delivery_async``): what the async adapters need.
        batch: ``guard_batch`` and ``guard_batch_async`` claim a batch.
        partitioning: the evidence is range-partitioned by expiry
            (``Inbox(partitioning=...)``; ``create_partitions()`` works).
        hash_tags: the guard and ``lookup`` take a ``hash_tag`` (Redis Cluster).
        key_scan: operators read the evidence by scanning the store's keys
            (``evidence()``) and the server's ``durability()``; a store
            without it is read through its database's tables.
    """

    store: str
    local: Literal["db", "redis"]
    transaction: Literal["session", "pipeline"]
    async_guard: bool
    async_sessions: bool
    batch: bool
    partitioning: bool
    hash_tags: bool = False
    key_scan: bool = False


@runtime_checkable
class InboxStore(Protocol):
    """An inbox: records each business command once, in the caller's local
    transaction, and keeps refused deliveries in a durable quarantine.

    Every store keeps the same numbered guarantees (docs/guarantees.md) and
    raises the same :mod:`inboxguard.errors`; :mod:`inboxguard.testing`'s
    conformance suite checks a store against them.
    """

    @property
    def capabilities(self) -> StoreCapabilities:
        """What this store can do."""
        ...

    @property
    def retention(self) -> RetentionPolicy:
        """The evidence horizon and the windows it covers."""
        ...

    @property
    def clock(self) -> Clock:
        """The store's clock (aware datetimes)."""
        ...

    @property
    def lock_timeout(self) -> dt.timedelta | None:
        """How long a delivery waits on another one's claim (None: as long as
        the store does) before :class:`~inboxguard.InProgressError`."""
        ...

    @property
    def telemetry(self) -> bool:
        """Whether the store records OpenTelemetry metrics and spans."""
        ...

    def check_schema(self) -> None:
        """Refuse, at worker start-up, a store that cannot keep the guarantees
        (missing tables, an evicting server)."""
        ...

    def require_alignment(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Fail unless every replay window fits inside the evidence horizon."""
        ...

    def transaction_boundary(self) -> tuple[str, dict[str, Setting]]:
        """The guarantee table's transaction boundary: its sentence and settings."""
        ...

    def guard(
        self,
        tx: Any,
        /,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AbstractContextManager[InboxEntry]:
        """Claim ``command_id`` for ``consumer`` inside ``tx``, the caller's
        local transaction; the claim commits with it, or not at all."""
        ...

    def guard_async(
        self,
        tx: Any,
        /,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> AbstractAsyncContextManager[InboxEntry]:
        """:meth:`guard` for asyncio (refused unless ``capabilities.async_guard``)."""
        ...

    def guard_batch(
        self,
        tx: Any,
        /,
        *,
        consumer: str,
        commands: Any,
        exclude: Iterable[str] = (),
    ) -> AbstractContextManager[InboxBatch]:
        """Claim a batch of commands inside ``tx`` (refused unless
        ``capabilities.batch``)."""
        ...

    def guard_batch_async(
        self,
        tx: Any,
        /,
        *,
        consumer: str,
        commands: Any,
        exclude: Iterable[str] = (),
    ) -> AbstractAsyncContextManager[InboxBatch]:
        """:meth:`guard_batch` for asyncio (refused unless ``capabilities.batch``
        and ``capabilities.async_sessions``)."""
        ...

    def handler(
        self,
        *,
        consumer: str,
        command_id: CommandIdSpec,
        exclude: Iterable[str] = (),
        guarantee: Guarantee | None = None,
        sent_at: Any = None,
    ) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorate ``fn(tx, *args, **kwargs)`` so each command runs once."""
        ...

    def handler_async(
        self,
        *,
        consumer: str,
        command_id: CommandIdSpec,
        exclude: Iterable[str] = (),
        guarantee: Guarantee | None = None,
        sent_at: Any = None,
    ) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]:
        """:meth:`handler` for ``async def fn(tx, ...)``."""
        ...

    def lookup(self, consumer: str, command_id: str) -> InboxRecord | None:
        """The committed evidence of a command, or None."""
        ...

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
        """Write (or count again) a refused delivery's quarantine record, outside
        the caller's transaction; False (the record logged) when it failed."""
        ...

    def quarantined(
        self,
        consumer: str | None = None,
        *,
        status: str | None = "open",
        limit: int | None = None,
        after: int | None = None,
    ) -> list[QuarantineRecord]:
        """Quarantine records, oldest first; ``after`` an id: the page after it."""
        ...

    def quarantine_count(self, consumer: str | None = None, *, status: str | None = "open") -> int:
        """How many records :meth:`quarantined` would list without a limit."""
        ...

    def quarantine_record(self, record_id: int) -> QuarantineRecord | None:
        """The quarantine record with this id, or None."""
        ...

    def quarantine_records_of(self, consumer: str, command_id: str) -> list[QuarantineRecord]:
        """Every quarantine record of one command, oldest first."""
        ...

    def resolve_quarantine(
        self, record_id: int, *, actor: str | None = None, reason: str | None = None
    ) -> bool:
        """Mark an open record resolved; False when none is open with that id."""
        ...

    def release_quarantine(
        self, record_id: int, *, actor: str, reason: str
    ) -> QuarantineAction | None:
        """Let a quarantined command be processed again (recorded)."""
        ...

    def quarantine_actions(self, record_id: int) -> list[QuarantineAction]:
        """The recorded releases and resolutions of a record, oldest first."""
        ...

    def record_quarantine_replay(
        self,
        record: QuarantineRecord,
        *,
        destination: str,
        replayed_by: str,
        reason: str,
        receipt: Any = None,
    ) -> QuarantineReplay:
        """Record an operator's replay of ``record`` and mark it resolved."""
        ...

    def quarantine_replays(self, record_id: int) -> list[QuarantineReplay]:
        """The recorded replays of a record, oldest first."""
        ...


def is_inbox_store(obj: object) -> TypeGuard[InboxStore]:
    """Whether ``obj`` is an inbox store: its class declares
    :class:`StoreCapabilities`. Only the class is searched first, so an
    object answering every attribute (a mock, a lazy proxy) neither passes
    nor runs its ``__getattr__``."""
    if not any("capabilities" in vars(cls) for cls in type(obj).__mro__):
        return False
    return isinstance(getattr(obj, "capabilities", None), StoreCapabilities)


@runtime_checkable
class SqlInboxStore(InboxStore, Protocol):
    """An :class:`InboxStore` whose evidence lives in SQL tables
    (``capabilities.local == "db"``): the SQLAlchemy :class:`~inboxguard.Inbox`
    and the Django store. Operators' checks (``inboxguard doctor``) and the
    async adapters reach its database through these."""

    @property
    def engine(self) -> Engine:
        """The engine of the store's own transactions (quarantine, purge, reads)."""
        ...

    @property
    def tables(self) -> InboxTables:
        """The inbox's tables."""
        ...

    @property
    def table_prefix(self) -> str:
        """The prefix of the inbox's tables."""
        ...

    @property
    def partitioning(self) -> Granularity | None:
        """The evidence's partition granularity, or None."""
        ...

    def create_partitions(self, *, ahead: int = ..., now: dt.datetime | None = None) -> list[str]:
        """Create the partitions ahead (refused without ``partitioning``)."""
        ...

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
        """:meth:`InboxStore.quarantine_delivery` through an ``AsyncEngine``."""
        ...

    async def quarantine_records_of_async(
        self, engine: AsyncEngine, consumer: str, command_id: str
    ) -> list[QuarantineRecord]:
        """:meth:`InboxStore.quarantine_records_of` through an ``AsyncEngine``."""
        ...


def is_sql_store(obj: object) -> TypeGuard[SqlInboxStore]:
    """Whether ``obj`` is an inbox store whose evidence lives in SQL tables."""
    return is_inbox_store(obj) and obj.capabilities.local == "db"
