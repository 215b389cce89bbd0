"""FastStream adapter: :class:`InboxMiddleware` runs each command once.

The middleware is a FastStream broker middleware factory: FastStream calls
it once per message and per publish. On a message it opens the transaction,
claims the command in the inbox, runs the handler inside the claim, commits,
and only then acknowledges; every failure goes through the shared outcome
policy (``inboxguard.adapters._outcome``) and the shared redelivery cap
(``inboxguard.adapters._redelivery``). On a publish it stamps the
``x-inbox-sent-at`` header when the message has none.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, cast

from faststream import BaseMiddleware
from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard._core import headers as _headers
from inboxguard.adapters._delivery import DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_DELAY
from inboxguard.adapters._evidence import (
    Refused,
    record_refusal,
    record_refusal_async,
)
from inboxguard.adapters._redelivery import Redelivery
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters.faststream._brokers import BrokerKind, kind_of
from inboxguard.adapters.faststream._flow import Delivery
from inboxguard.adapters.faststream._guarantee import register_subscribers
from inboxguard.adapters.faststream._kafka import is_kafka, kafka_kind, kafka_windows
from inboxguard.adapters.faststream._kafka_batch import KafkaBatch, is_batch
from inboxguard.adapters.faststream._options import (
    CommandId,
    HandlerOptions,
    handler_of,
    options_for,
)
from inboxguard.adapters.faststream._settlement import check_subscriber
from inboxguard.adapters.faststream._startup import (
    check_subscribers,
    check_tables,
    replay_windows,
    subscriber_name,
)
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import InboxStore, is_inbox_store

if TYPE_CHECKING:
    from inboxguard.inbox import Inbox

__all__ = ["InboxMiddleware"]

logger = logging.getLogger("inboxguard.faststream")

_STAMP = (
    "publish it through a broker carrying InboxMiddleware or SentAtMiddleware (they stamp"
    " x-inbox-sent-at), or through the outbox, or set an x-inbox-sent-at header (ISO 8601)"
)


class InboxMiddleware:
    """Run each FastStream handler once per business command.

    Pass it in the broker's (or a router's) ``middlewares=``. Each message's
    handler runs inside one database transaction that also claims the
    command in the inbox and stores the handler's return value; the message
    is acknowledged only after that transaction commits.

    * a redelivery of a committed command (same payload) is acknowledged
      without running the handler (its stored result is returned);
    * a payload mismatch or a message older than the evidence horizon is
      quarantined, then rejected without requeue (RabbitMQ dead-letters it
      where the queue has a dead-letter exchange; JetStream terminates it;
      Redis Streams acknowledge it, the quarantine record being the dead
      letter; Kafka produces it to ``dead_letter_topic``, then commits its
      offset): never redelivered;
    * a claim held by another transaction, a transient database error or a
      handler exception is retried ``retry_delay`` later (NATS: ``nack``
      with that delay; RabbitMQ and Redis: a copy with the next
      ``x-inbox-attempt``, then the original is acknowledged), and at
      ``max_attempts`` quarantined as ``retries_exhausted`` and rejected.

    Args:
        inbox: the :class:`inboxguard.Inbox` holding the evidence.
        consumer: the consumer name evidence is filed under (declared, never
            derived from a module path). :func:`inbox_consumer` under
            ``@broker.subscriber`` overrides it for one handler.
        command_id: the name of a field of the decoded body, a callable
            ``(body, headers) -> str``, or None for the ``x-inbox-command-id``
            header the outbox stamps.
        session_factory: opens a SQLAlchemy ``Session`` per message (the sync
            guard; its database calls block the event loop).
        async_session_factory: opens an ``AsyncSession`` per message (the
            async guard, :meth:`inboxguard.Inbox.guard_async`). Give exactly
            one of the two. The handler reaches the session with
            :func:`inboxguard.current_session`.
        exclude: payload keys left out of the digest.
        max_attempts: deliveries of one message before ``retries_exhausted``.
        retry_delay: the wait before each retry.
        require_sent_at: refuse (quarantine as ``missing_sent_at``, reject) a
            message without a sent time instead of logging the first one.
        windows: replay windows of your own (a dead-letter replay you run
            by hand, a backfill), checked with the broker's at start-up.
        shared_consumer: True when another handler uses ``consumer`` on
            purpose (both say so).
        dead_letter_topic: Kafka only: the topic a refused message is
            produced to (key, value and headers) before its offset is
            committed; without it the quarantine record is the dead letter.

    Raises:
        ConfigurationError: an argument that cannot keep the guarantees.
    """

    #: Found by ``inboxguard guarantees`` among a broker's subscribers' middlewares.
    __inboxguard_faststream_guard__ = True

    def __init__(  # noqa: PLR0913 - the guard's settings plus the retry settings
        self,
        inbox: InboxStore,
        *,
        consumer: str,
        command_id: CommandId,
        session_factory: Callable[[], Any] | None = None,
        async_session_factory: Callable[[], AsyncSession] | None = None,
        exclude: Iterable[str] = (),
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        retry_delay: dt.timedelta = DEFAULT_RETRY_DELAY,
        require_sent_at: bool = False,
        windows: Mapping[str, dt.timedelta] | None = None,
        shared_consumer: bool = False,
        dead_letter_topic: str | None = None,
    ) -> None:
        if not (is_inbox_store(inbox) and inbox.capabilities.transaction == "session"):
            msg = f"InboxMiddleware needs an inboxguard.Inbox, got {type(inbox).__name__}"
            raise ConfigurationError(msg)
        _require_one_factory(session_factory, async_session_factory)
        if async_session_factory is not None and not inbox.capabilities.async_sessions:
            msg = (
                f"async_session_factory needs a store of AsyncSessions; the"
                f" {inbox.capabilities.store} store guards only in session_factory's sessions"
            )
            raise ConfigurationError(msg)
        self.inbox = inbox
        self.default = HandlerOptions.checked(consumer, command_id, exclude, shared_consumer)
        self.session_factory = session_factory
        self.async_session_factory = async_session_factory
        self.policy = Redelivery.checked(max_attempts, retry_delay, logger)
        self.retry_delay = retry_delay
        self.windows = _declared_windows(windows)
        if not isinstance(require_sent_at, bool):
            msg = f"require_sent_at must be True or False, got {require_sent_at!r}"
            raise ConfigurationError(msg)
        self.require_sent_at = require_sent_at
        if dead_letter_topic is not None and not (
            isinstance(dead_letter_topic, str) and dead_letter_topic
        ):
            msg = f"dead_letter_topic must be a Kafka topic name, got {dead_letter_topic!r}"
            raise ConfigurationError(msg)
        self.dead_letter_topic = dead_letter_topic
        self._sent_checks: dict[str, SentTimeCheck] = {}
        self.checked = False
        self._warned_unchecked = False
        self._refusals: dict[int, ConfigurationError | None] = {}

    # -- FastStream's middleware factory protocol --------------------------------------------

    def __call__(self, msg: Any, /, *, context: Any) -> _Scope:
        """The per-message (or per-publish) middleware FastStream enters."""
        return _Scope(msg, context=context, guard=self)

    # -- start-up ------------------------------------------------------------------------------

    def check_startup(self, broker: Any) -> None:
        """Refuse to start unless every guarded subscriber of ``broker`` can keep
        the guarantees. Call it from the application's start-up hook:
        ``FastStream(broker, on_startup=[lambda: guard.check_startup(broker)])``.

        Checks: the inbox tables exist; no guarded subscriber acknowledges
        before its commit (``AckPolicy.ACK_FIRST``; on Kafka anything but
        ``AckPolicy.MANUAL``), reads a Redis stream
        without a consumer group or listens on core NATS; a JetStream
        ``max_deliver`` does not stop deliveries before ``max_attempts``; each
        handler's consumer name is its own; and every replay window (queue
        ``x-message-ttl``, Redis claim idle time, JetStream ``ack_wait``, the
        retry schedule, the declared ``windows``, the retention of each Kafka
        topic read by a subscriber resetting to ``earliest``) fits in the
        evidence horizon.

        Raises:
            ConfigurationError: a subscriber or setting that cannot keep the
                guarantees, or missing tables.
            RetentionMisalignedError: a replay window outlives the evidence.
        """
        subscribers = [s for s in getattr(broker, "subscribers", ()) if self.guards(s)]
        policy = self.policy
        check_subscribers(self.inbox, subscribers, self.default, policy.max_attempts)
        for window in replay_windows(
            subscribers, max_attempts=policy.max_attempts, retry_delay=self.retry_delay
        ):
            self.inbox.require_alignment(window.source, **{window.name: window.bound})
        if self.windows:
            self.inbox.require_alignment("faststream: InboxMiddleware(windows=...)", **self.windows)
        for found in kafka_windows(broker, subscribers):
            self.inbox.require_alignment(found.source, **{found.name: found.bound})
        check_tables(self.inbox)
        register_subscribers(self, broker)
        self.checked = True

    def guards(self, subscriber: Any) -> bool:
        """Whether this middleware guards ``subscriber``."""
        middlewares = getattr(subscriber, "_broker_middlewares", None)
        return middlewares is None or any(m is self for m in middlewares)

    # -- one message ----------------------------------------------------------------------------

    def sent_check(self, consumer: str) -> SentTimeCheck:
        """The sent-time rule of ``consumer`` (one warning per consumer)."""
        check = self._sent_checks.get(consumer)
        if check is None:
            check = self._sent_checks[consumer] = SentTimeCheck(
                consumer,
                require=self.require_sent_at,
                stamp=_STAMP,
                option="require_sent_at",
                logger=logger,
            )
        return check

    async def consume(self, call_next: Any, msg: Any, context: Any) -> Any:
        """Guard one message (see the class docstring)."""
        if not self.checked and not self._warned_unchecked:
            self._warned_unchecked = True
            logger.warning(
                "InboxMiddleware.check_startup(broker) was never called: replay windows and"
                " subscriber settings are unchecked; call it from the app's on_startup hook"
            )
        subscriber = context.get_local("handler_")
        options = options_for(handler_of(call_next, subscriber), self.default)
        if is_kafka(msg):
            kafka = kafka_kind(msg).bind(context.get_local("broker"), self.dead_letter_topic)
            if is_batch(msg):
                return await KafkaBatch(self, kafka, msg, options).run(call_next)
            kind: BrokerKind = kafka
        else:
            kind = kind_of(msg)
        delivery = Delivery(self, kind, msg, options, context, subscriber)
        return await delivery.run(call_next)

    def refusal_of(self, subscriber: Any) -> ConfigurationError | None:
        """Why the settlement table refuses ``subscriber`` (None: it accepts it),
        judged on its first message, whether or not ``check_startup`` ran:
        a delivery the subscriber cannot settle safely is quarantined, never
        run."""
        if subscriber is None:
            return None
        key = id(subscriber)
        if key not in self._refusals:
            where = f"InboxMiddleware cannot guard subscriber {subscriber_name(subscriber)!r}"
            try:
                check_subscriber(subscriber, where, self.policy.max_attempts)
            except ConfigurationError as error:
                logger.critical("%s; its deliveries are quarantined, never run", error)
                self._refusals[key] = error
            else:
                self._refusals[key] = None
        return self._refusals[key]

    async def record(self, error: BaseException, refused: Refused, reason: str | None) -> bool:
        """Whether a quarantine record now holds the delivery."""
        if self.async_session_factory is None:
            return await asyncio.to_thread(record_refusal, self.inbox, error, refused, reason)
        try:
            async with self.async_session_factory() as session:
                engine = (await session.connection()).engine
        except Exception:
            return False
        # __init__ takes an async_session_factory only with a store of AsyncSessions.
        inbox = cast("Inbox", self.inbox)
        return await record_refusal_async(inbox, engine, error, refused, reason)


class _Scope(BaseMiddleware):
    """The middleware FastStream enters for one message or one publish."""

    def __init__(self, msg: Any, /, *, context: Any, guard: InboxMiddleware) -> None:
        super().__init__(msg, context=context)
        self.guard = guard

    async def consume_scope(self, call_next: Any, msg: Any) -> Any:
        return await self.guard.consume(call_next, msg, self.context)

    async def publish_scope(self, call_next: Any, cmd: Any) -> Any:
        stamp_sent_at(cmd)
        return await call_next(cmd)


def stamp_sent_at(cmd: Any) -> None:
    """Add ``x-inbox-sent-at`` (now, ISO 8601 UTC) to a publish without one."""
    headers = getattr(cmd, "headers", None)
    if headers is None or _headers.sent_at_of(headers) is not None:
        return
    cmd.headers = {**headers, _headers.SENT_AT: dt.datetime.now(dt.UTC).isoformat()}


def _require_one_factory(sync: object, async_: object) -> None:
    if (sync is None) == (async_ is None):
        msg = (
            "InboxMiddleware needs exactly one of session_factory (a sessionmaker: the sync"
            " guard) or async_session_factory (an async_sessionmaker: the async guard),"
            f" got session_factory={sync!r}, async_session_factory={async_!r}"
        )
        raise ConfigurationError(msg)
    factory = sync if sync is not None else async_
    if not callable(factory):
        msg = f"the session factory must be a zero-argument callable, got {factory!r}"
        raise ConfigurationError(msg)


def _declared_windows(windows: object) -> dict[str, dt.timedelta]:
    if windows is None:
        return {}
    if not isinstance(windows, Mapping) or not all(
        isinstance(k, str) and isinstance(v, dt.timedelta) for k, v in windows.items()
    ):
        msg = (
            "windows must map window names to timedeltas, e.g."
            f' {{"dead_letter_replay": timedelta(days=7)}}; got {windows!r}'
        )
        raise ConfigurationError(msg)
    return dict(windows)
