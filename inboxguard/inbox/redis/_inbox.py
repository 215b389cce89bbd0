"""The Redis inbox: the inbox's guarantee for consumers whose state lives in
Redis, with ``MULTI``/``EXEC`` as the transaction.

Redis is imported lazily, by the drivers and checks that talk to it: this
module (and ``inboxguard``) imports without the ``redis`` package.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, NoReturn, TypeVar

from inboxguard._core.checks import check_clock
from inboxguard._core.clock import Clock, utc_now
from inboxguard._core.extract import CommandIdSpec
from inboxguard._core.guarantee import Guarantee, Setting
from inboxguard._core.retention import RetentionPolicy
from inboxguard._telemetry import check_switch, telemetry_for
from inboxguard.errors import ConfigurationError
from inboxguard.inbox._handlers import SentAtSpec, async_handler, registering, sync_handler
from inboxguard.inbox._records import InboxEntry, InboxRecord
from inboxguard.inbox._settings import DEFAULT_LOCK_TIMEOUT
from inboxguard.inbox.redis._capabilities import CAPABILITIES, NO_BATCH
from inboxguard.inbox.redis._checks import check_client, check_durations, is_cluster
from inboxguard.inbox.redis._drive import drive_sync
from inboxguard.inbox.redis._drive_async import drive_async
from inboxguard.inbox.redis._flow import RedisFlows
from inboxguard.inbox.redis._inbox_quarantine import RedisQuarantineMethods
from inboxguard.inbox.redis._keys import KeySpace
from inboxguard.inbox.redis._server import (
    RedisDurability,
    check_eviction,
    describe_boundary,
    read_durability,
    warn_if_volatile,
)
from inboxguard.inbox.redis._store import RedisRecords

__all__ = ["DEFAULT_LEASE", "RedisInbox"]

R = TypeVar("R")

#: Default lifetime of a claim's lease (how long a crashed worker's claim
#: keeps other deliveries of the command waiting).
DEFAULT_LEASE = dt.timedelta(seconds=60)


class RedisInbox(RedisQuarantineMethods):
    """Records each business command once, in the caller's Redis ``MULTI``/``EXEC``.

    The evidence (command ID, payload digest, stored result, expiry at the
    retention horizon) is queued in the caller's transactional pipeline
    before the block's own writes and commits in the same ``EXEC``, or not
    at all. A concurrent delivery that commits first makes the ``EXEC`` fail
    (``WATCH``): nothing of the block is applied and the command is judged
    again, never applied twice. Duplicates, mismatches, in-progress and
    beyond-retention deliveries behave as in :class:`inboxguard.Inbox`, with
    the same errors.

    Args:
        client: a ``redis.Redis`` client (sync): it serves the start-up checks,
            quarantine records, lookups and operators. ``guard()`` takes a
            pipeline of it; ``guard_async()`` a ``redis.asyncio`` pipeline on
            the same server.
        retention: a :class:`RetentionPolicy`, or a ``timedelta``; evidence
            keys expire after its horizon.
        key_prefix: prefix of every key the inbox writes (no braces).
        lock_timeout: how long a delivery waits for another delivery holding
            the command's lease before :class:`InProgressError`; ``None``
            waits until the lease lapses.
        lease: how long a claim's lease lives: a worker that dies mid-block
            keeps other deliveries of its command waiting at most this long
            (its queued writes were never sent, so nothing is applied).
        clock: zero-argument callable returning an aware datetime.
        allow_eviction: accept a server whose ``maxmemory-policy`` may evict
            keys (evidence could vanish and a command apply twice).
        cluster: check, before ``EXEC``, that every key the block writes is
            in the command's hash slot (a clear error instead of
            ``CROSSSLOT``); ``None``: on when ``client`` is a ``RedisCluster``.
        telemetry: record OpenTelemetry metrics and spans (claims by outcome,
            claim, handler and commit spans) as :class:`inboxguard.Inbox`
            does; ``False`` records nothing.

    Raises:
        ConfigurationError: an argument cannot keep the guarantees, or the
            server may evict keys (see ``allow_eviction``).
    """

    #: Pipelines, sync and redis.asyncio; no batch claim (see ``_capabilities``).
    capabilities = CAPABILITIES

    def __init__(  # noqa: PLR0913 - keyword-only settings, as Inbox
        self,
        client: Any,
        *,
        retention: RetentionPolicy | dt.timedelta,
        key_prefix: str = "inboxguard:",
        lock_timeout: dt.timedelta | None = DEFAULT_LOCK_TIMEOUT,
        lease: dt.timedelta = DEFAULT_LEASE,
        clock: Clock | None = None,
        allow_eviction: bool = False,
        cluster: bool | None = None,
        telemetry: bool = True,
    ) -> None:
        check_switch("telemetry", telemetry)
        check_client(client)
        check_durations(lock_timeout, lease)
        check_clock(clock)
        self.client = client
        self.keys = KeySpace(key_prefix)
        self.key_prefix = key_prefix
        self.retention = RetentionPolicy.coerce(retention)
        self.lock_timeout = lock_timeout
        self.lease = lease
        self.clock: Clock = clock or utc_now
        self.allow_eviction = allow_eviction
        self.cluster = is_cluster(client) if cluster is None else bool(cluster)
        self.maxmemory_policy = check_eviction(client, allow_eviction=allow_eviction)
        warn_if_volatile(client)
        self.telemetry = telemetry
        self._flows = RedisFlows(
            self.keys,
            self.retention,
            self.clock,
            lock_timeout,
            lease,
            self.cluster,
            telemetry_for(telemetry),
        )
        self._records = RedisRecords(client, self.keys)

    def __repr__(self) -> str:
        """Show the server, prefix and retention."""
        return f"<RedisInbox {self.client!r} {self.key_prefix!r} {self.retention}>"

    # -- server --------------------------------------------------------------------------

    def transaction_boundary(self) -> tuple[str, dict[str, Setting]]:
        """The guarantee table's boundary, with the durability the server reports
        now (a change of ``appendfsync``, AOF or replication shows in a lock check)."""
        return describe_boundary(self.durability(), self.key_prefix)

    def durability(self) -> RedisDurability:
        """Read from the server what a committed claim survives: eviction
        policy, AOF and its fsync policy, RDB snapshots, replication."""
        return read_durability(self.client)

    def check_schema(self) -> None:
        """Check the server again at worker start-up (Redis has no tables):
        refuse an evicting ``maxmemory-policy`` unless ``allow_eviction``, and
        warn (:class:`~inboxguard.RedisDurabilityWarning`) when the server
        keeps nothing on disk.

        Raises:
            ConfigurationError: the server may evict keys.
        """
        self.maxmemory_policy = check_eviction(self.client, allow_eviction=self.allow_eviction)
        warn_if_volatile(self.client)

    def require_alignment(self, source: str = "declared", **windows: dt.timedelta) -> None:
        """Fail unless every replay window fits inside the evidence horizon.

        Raises:
            RetentionMisalignedError: a window is longer than the horizon.
        """
        self.retention.check(source, **windows)

    # -- the guard -------------------------------------------------------------------------

    @contextmanager
    def guard(
        self,
        pipe: Any,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
        hash_tag: str | None = None,
    ) -> Iterator[InboxEntry]:
        """Claim ``command_id`` for ``consumer`` in the caller's pipeline.

        ``pipe`` is a fresh transactional pipeline (``client.pipeline()``).
        The guard ``WATCH``es the command's evidence, reads it, starts
        ``MULTI`` and, for a fresh command, queues the claim; the block queues
        its writes on ``pipe`` (never ``execute()`` it); the guard sends
        ``EXEC`` when the block exits, with the result assigned to
        ``entry.result``. An exception in the block discards everything.
        The command's keys take the hash tag of ``command_id`` (``"{acct-42}:t-1"``),
        so that, on a cluster, the block's keys tagged alike share their slot;
        ``hash_tag``, when given, must be that tag (identity is the consumer
        and the command ID, nothing else).

        Raises:
            InvalidCommandError: ``consumer`` or ``command_id`` is unusable.
            PayloadEncodingError: the payload (or the assigned result) has no
                canonical encoding.
            ConfigurationError: ``pipe`` is not a fresh sync pipeline; it was
                executed or reset inside the block; on a cluster, the block
                wrote a key in another hash slot; ``hash_tag`` is not the
                command ID's own tag.
            PayloadMismatchError: the command was processed with another
                payload; quarantined, the block does not run.
            BeyondRetentionError: ``sent_at`` is older than the horizon;
                quarantined, the block does not run.
            InProgressError: another delivery holds the lease past
                ``lock_timeout``, or committed first while the block ran
                (nothing of the block was applied).
        """
        flow = self._flows.guard(consumer, command_id, payload, exclude, sent_at, details, hash_tag)
        with drive_sync(flow, pipe, self.client, self.keys, self._flows.telemetry) as entry:
            yield entry

    def guard_async(
        self,
        pipe: Any,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
        hash_tag: str | None = None,
    ) -> AbstractAsyncContextManager[InboxEntry]:
        """:meth:`guard` for a ``redis.asyncio`` pipeline, used as ``async with``:
        the same flow, decisions and errors; quarantine records go through a
        client on the pipeline's own connection pool."""
        flow = self._flows.guard(consumer, command_id, payload, exclude, sent_at, details, hash_tag)
        return drive_async(flow, pipe, self.keys, self._flows.telemetry)

    def guard_batch(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: a Redis inbox claims one command per ``EXEC``
        (``capabilities.batch`` is False).

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(NO_BATCH)

    def guard_batch_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused, as :meth:`guard_batch`.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(NO_BATCH)

    def handler(
        self,
        *,
        consumer: str,
        command_id: CommandIdSpec,
        exclude: Iterable[str] = (),
        guarantee: Guarantee | None = None,
        sent_at: SentAtSpec | None = None,
    ) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorate ``fn(pipe, *args, **kwargs)`` so each command runs once
        (see :meth:`inboxguard.Inbox.handler`); ``fn`` queues its writes on
        ``pipe``. The handler is listed by :func:`inboxguard.guarantees_of`,
        its table stating the server's durability (:meth:`durability`).
        ``sent_at`` (a callable over the arguments after ``pipe``, or the name
        of one) gives the message's own timestamp: a replay older than the
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
            self, "RedisInbox.handler", decorate, consumer, command_id, exclude, guarantee
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
        """:meth:`handler` for ``async def fn(pipe, ...)`` on a redis.asyncio pipeline."""
        exclude = tuple(exclude)
        decorate = async_handler(
            self.guard_async,
            consumer=consumer,
            command_id=command_id,
            exclude=exclude,
            sent_at=sent_at,
        )
        return registering(
            self, "RedisInbox.handler_async", decorate, consumer, command_id, exclude, guarantee
        )

    # -- evidence --------------------------------------------------------------------------

    def lookup(
        self, consumer: str, command_id: str, *, hash_tag: str | None = None
    ) -> InboxRecord | None:
        """Return the committed evidence of a command, or None (``hash_tag``,
        when given, must be the command ID's own tag)."""
        return self._records.evidence(self.keys.command(consumer, command_id, hash_tag).evidence)

    def evidence(self) -> Iterator[InboxRecord]:
        """Every stored evidence record of the prefix, in no order (``SCAN``:
        its cost grows with the whole keyspace; for operators, not hot paths)."""
        return self._records.all_evidence()

    def drop_keys(self) -> int:
        """Delete every key under the prefix (evidence, leases, quarantine);
        return how many. For tests and teardown."""
        return self._records.drop()
