"""Dramatiq adapter: :class:`InboxMiddleware` runs guarded actors once per
business command.

Usage::

    broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))

    @dramatiq.actor(inbox_command_id="order_id", inbox_consumer="orders.ship")
    def ship(order_id: str, address: str) -> dict:
        session = inboxguard.current_session()
        ...

See ``docs/adapters/dramatiq.md`` for the recipe and its guarantees.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from dramatiq import Actor, Broker, Middleware, Worker
from dramatiq.asyncio import async_to_sync
from dramatiq.broker import MessageProxy
from dramatiq.middleware import AsyncIO, MiddlewareError

from inboxguard import InboxStore
from inboxguard._core.digest import digest_of
from inboxguard._core.extract import command_id_getter
from inboxguard._core.identity import validate_identity
from inboxguard._core.retention import CheckedWindow, Window
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters._fork import engines_of, track
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters._startup_checks import log_alignment_passed, require_tables
from inboxguard.adapters._stores import INBOX_KINDS, check_pairing, is_inbox
from inboxguard.adapters.dramatiq._async_guard import (
    AsyncGuard,
    AsyncSessionFactory,
    async_guarded,
    coroutine_fn_of,
    stop_event_loop_thread,
)
from inboxguard.adapters.dramatiq._guarantee import (
    GUARANTEE_OPTION,
    check_guarantee,
    register_actor,
)
from inboxguard.adapters.dramatiq._guard import (
    DUE_OPTION,
    NEVER_RETRIED,
    GuardedFn,
    SessionFactory,
    current_message,
)
from inboxguard.adapters.dramatiq._settlement import check_actors
from inboxguard.adapters.dramatiq._windows import replay_windows
from inboxguard.errors import (
    ConfigurationError,
    InboxGuardError,
    PayloadEncodingError,
    RetentionMisalignedError,
)

__all__ = ["InboxMiddleware"]

logger = logging.getLogger("inboxguard.dramatiq")
#: The actor options this middleware declares.
OPTIONS = frozenset(
    {
        "inbox_command_id",
        "inbox_consumer",
        "inbox_exclude",
        "inbox_shared_consumer",
        "inbox_require_sent_at",
        GUARANTEE_OPTION,
    }
)
_STAMP = (
    "Dramatiq stamps message_timestamp on every message it enqueues; keep it when"
    " building messages by hand"
)
#: Default wait before a busy command (another transaction holds it) is retried.
DEFAULT_BUSY_DELAY = dt.timedelta(seconds=1)


class _RefusedConfigurationError(ConfigurationError, MiddlewareError):
    """A ConfigurationError that Dramatiq's hook dispatch lets through."""


class _RefusedRetentionError(RetentionMisalignedError, MiddlewareError):
    """A RetentionMisalignedError that Dramatiq's hook dispatch lets through."""


class InboxMiddleware(Middleware):
    """Run each actor declared with ``inbox_command_id`` once per business command.

    Add it to the broker *before* the actors are declared. A guarded actor's
    function runs inside one database transaction that also claims the
    command in the inbox and stores the actor's result where a ``Results``
    middleware stores it too (or for a direct call); the message is
    acknowledged only after that transaction commits. A redelivery of a
    committed command returns the stored result (``None`` where none was
    stored) without running the body;
    a command the inbox refuses (payload mismatch, older than the evidence
    horizon) is quarantined and dead-lettered, never retried; a busy claim
    or a transient database error is retried with ``dramatiq.Retry``, and
    quarantined as ``retries_exhausted`` before its last retry is refused.
    An ``async def`` actor gets the same transaction and outcomes through
    :meth:`inboxguard.Inbox.guard_async`.

    Actor options:
        inbox_command_id: a callable over the actor's arguments returning the
            business command ID, or the name of the argument holding it.
        inbox_consumer: the consumer name evidence is recorded under
            (default: the actor name; set it so a rename keeps the evidence).
        inbox_exclude: payload keys left out of the digest.
        inbox_shared_consumer: True when this actor shares its consumer name
            with another actor on purpose (both set it); otherwise a consumer
            name already used by another guarded actor is refused.
        inbox_require_sent_at: True to refuse (quarantine as
            ``missing_sent_at``, dead-letter) a message without a sent time
            (``message_timestamp``); otherwise the first is logged at WARNING.
        inbox_guarantee: an :class:`inboxguard.Guarantee` declaring what only
            you know of the actor's guarantee table (provider, ledger,
            terminal states); ``inboxguard guarantees`` derives the rest.

    Args:
        inbox: the :class:`inboxguard.Inbox` holding the evidence.
        session_factory: opens a new SQLAlchemy ``Session`` (or
            ``Connection``) per message, e.g. a ``sessionmaker``; the actor
            body reaches it with :func:`inboxguard.current_session`.
        async_session_factory: opens a new SQLAlchemy ``AsyncSession`` (or
            ``AsyncConnection``) per message for ``async def`` actors, e.g.
            an ``async_sessionmaker`` on an ``AsyncEngine`` of the inbox's
            database; required only when an async actor is guarded. The
            broker then needs Dramatiq's ``AsyncIO`` middleware.
        busy_delay: roughly how long a busy command waits before its retry.

    Raises:
        ConfigurationError: bad arguments; at actor declaration, bad inbox
            options or an ``async def`` actor without ``async_session_factory``;
            at worker boot, no Retries middleware (or no AsyncIO middleware
            for guarded async actors). ``RetentionMisalignedError`` at worker boot when a
            replay window outlives the inbox's evidence horizon.
    """

    def __init__(
        self,
        inbox: InboxStore,
        *,
        session_factory: SessionFactory,
        async_session_factory: AsyncSessionFactory | None = None,
        busy_delay: dt.timedelta = DEFAULT_BUSY_DELAY,
    ) -> None:
        if not is_inbox(inbox):
            msg = f"InboxMiddleware needs {INBOX_KINDS}, got {type(inbox).__name__}"
            raise ConfigurationError(msg)
        if not callable(session_factory):
            msg = (
                "session_factory must be a zero-argument callable returning a Session,"
                f" e.g. sessionmaker(engine); got {session_factory!r}"
            )
            raise ConfigurationError(msg)
        check_pairing(inbox, session_factory, "InboxMiddleware")
        if async_session_factory is not None and not callable(async_session_factory):
            msg = (
                "async_session_factory must be a zero-argument callable returning an"
                " AsyncSession, e.g. async_sessionmaker(async_engine); got"
                f" {async_session_factory!r}"
            )
            raise ConfigurationError(msg)
        if async_session_factory is not None and not inbox.capabilities.async_sessions:
            msg = (
                "async actors are guarded in a SQLAlchemy AsyncSession, which the"
                f" {inbox.capabilities.store} store does not take; guard sync actors"
                " (session_factory) or use an inboxguard.Inbox for async ones"
            )
            raise ConfigurationError(msg)
        if not isinstance(busy_delay, dt.timedelta) or busy_delay <= dt.timedelta(0):
            msg = f"busy_delay must be a positive timedelta, got {busy_delay!r}"
            raise ConfigurationError(msg)
        self.inbox = inbox
        self.session_factory = session_factory
        self.async_session_factory = async_session_factory
        self.busy_delay = busy_delay
        self.guarded: dict[str, Actor[Any, Any]] = {}
        self.async_actors: set[str] = set()
        # A worker process forked after this point starts on fresh pools.
        track(engines_of(inbox, session_factory))

    @property
    def actor_options(self) -> set[str]:
        """The options Dramatiq accepts on actors once this middleware is added."""
        return set(OPTIONS)

    # -- declaration ----------------------------------------------------------------------

    def before_declare_actor(self, broker: Broker, actor: Actor[Any, Any]) -> None:
        """Wrap a guarded actor's function; refuse bad options loudly.

        Every error is raised as a ``ConfigurationError`` that is also a
        ``MiddlewareError``: Dramatiq swallows any other exception raised by
        a hook, which would leave the actor declared but unguarded.
        """
        try:
            self._declare(broker, actor)
        except ConfigurationError as error:
            raise _RefusedConfigurationError(error.args[0]) from error
        except Exception as error:  # anything else would leave the actor unguarded
            msg = f"actor {actor.actor_name!r} cannot be guarded: {error}"
            raise _RefusedConfigurationError(msg) from error

    def _declare(self, broker: Broker, actor: Actor[Any, Any]) -> None:
        options = actor.options
        spec = options.get("inbox_command_id")
        if spec is None:
            stray = sorted(OPTIONS.intersection(options))
            if stray:
                msg = (
                    f"actor {actor.actor_name!r} sets {', '.join(stray)} without"
                    " inbox_command_id; add inbox_command_id=<argument name or callable>"
                    " to guard it, or drop those options"
                )
                raise ConfigurationError(msg)
            return
        fn = actor.fn
        coroutine_fn = coroutine_fn_of(actor)
        consumer = validate_identity(options.get("inbox_consumer", actor.actor_name), "consumer")
        shared = bool(options.get("inbox_shared_consumer", False))
        check_guarantee(options.get(GUARANTEE_OPTION), actor.actor_name)
        claim_consumer(
            self.inbox, consumer, actor.actor_name, shared=shared, option="inbox_shared_consumer"
        )
        config: dict[str, Any] = {
            "inbox": self.inbox,
            "broker": broker,
            "actor_name": actor.actor_name,
            "consumer": consumer,
            "get_id": command_id_getter(spec, coroutine_fn or fn),
            "exclude": _exclude(actor.actor_name, options.get("inbox_exclude", ())),
            "busy_delay": self.busy_delay,
            "sent_time": SentTimeCheck(
                consumer,
                require=options.get("inbox_require_sent_at", False),
                stamp=_STAMP,
                option="inbox_require_sent_at",
                logger=logger,
            ),
        }
        if coroutine_fn is not None:
            # Dramatiq already wrapped it with async_to_sync; wrap the guarded
            # coroutine function the same way so it runs on the event loop thread.
            if self.async_session_factory is None:
                msg = (
                    f"actor {actor.actor_name!r} is an async def function and InboxMiddleware"
                    " has no async_session_factory; pass"
                    " InboxMiddleware(..., async_session_factory=async_sessionmaker(async_engine))"
                    " (an AsyncEngine on the inbox's database), or make the actor a plain def"
                )
                raise ConfigurationError(msg)
            guard = AsyncGuard(
                coroutine_fn, async_session_factory=self.async_session_factory, **config
            )
            actor.fn = async_to_sync(async_guarded(guard))
            self.async_actors.add(actor.actor_name)
        else:
            actor.fn = GuardedFn(fn, session_factory=self.session_factory, **config)
        options["throws"] = _with_never_retried(options.get("throws"))
        self.guarded[actor.actor_name] = actor
        register_actor(self.inbox, broker, actor, consumer, coroutine_fn or fn)

    # -- worker boot ----------------------------------------------------------------------

    def before_worker_boot(self, broker: Broker, worker: Worker) -> None:
        """Refuse to start on a database without the inbox tables, or when a
        replay window outlives the evidence horizon.

        Raised as ``MiddlewareError`` subclasses, which ``Worker.start``
        propagates, so the ``dramatiq`` worker process exits instead of
        consuming.
        """
        try:
            self.check_alignment(broker)
            if self.guarded:
                require_tables(self.inbox)
            horizon = self.inbox.retention.horizon
            checked = [CheckedWindow(w, horizon) for w in self.replay_windows(broker)]
            log_alignment_passed("Dramatiq", len(self.guarded), checked)
        except InboxGuardError as error:
            logger.critical("refusing to start the Dramatiq worker: %s", error)
            stop_event_loop_thread()
            if isinstance(error, RetentionMisalignedError):
                raise _RefusedRetentionError(
                    error.args[0], window=error.window, length=error.length, horizon=error.horizon
                ) from error
            raise _RefusedConfigurationError(error.args[0]) from error

    def check_alignment(self, broker: Broker) -> None:
        """Check the broker's replay windows against the inbox horizon.

        Raises:
            ConfigurationError: the broker has no Retries middleware, a
                guarded actor's settlement setting is not known to be safe
                (see ``DRAMATIQ_SETTLEMENT``), or guarded async actors and no
                AsyncIO middleware.
            RetentionMisalignedError: a window is longer than the horizon.
        """
        if self.async_actors and not any(isinstance(m, AsyncIO) for m in broker.middleware):
            msg = (
                f"guarded async actors ({', '.join(sorted(self.async_actors))}) need Dramatiq's"
                " event loop thread; add dramatiq.middleware.AsyncIO() to the broker"
            )
            raise ConfigurationError(msg)
        check_actors(broker, self.guarded.values())
        for window in self.replay_windows(broker):
            self.inbox.require_alignment(window.source, **{window.name: window.bound})

    def replay_windows(self, broker: Broker) -> list[Window]:
        """The windows through which the guarded actors' messages can come
        back, as the worker discovers them (Retries schedules, dead-letter
        TTL, Redis heartbeat requeue), each with where it was read.

        Raises:
            ConfigurationError: the broker has no Retries middleware.
        """
        return replay_windows(broker, self.guarded.values())

    # -- the current message, for the guarded function --------------------------------------

    def before_delay_message(self, broker: Broker, message: MessageProxy) -> None:
        """Remember when a delayed first delivery is due: its age counts from
        then (Dramatiq drops ``eta`` when the message becomes due)."""
        eta = message.options.get("eta")
        if isinstance(eta, int | float) and not message.options.get("retries"):
            message.options[DUE_OPTION] = eta

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        """Expose the message (ID, timestamp, options) to the guarded function."""
        current_message.set(message)

    def after_process_message(
        self,
        broker: Broker,
        message: MessageProxy,
        *,
        result: Any = None,
        exception: BaseException | None = None,
    ) -> None:
        """Forget the message."""
        current_message.set(None)

    def after_skip_message(self, broker: Broker, message: MessageProxy) -> None:
        """Forget the message."""
        current_message.set(None)


def _exclude(actor_name: str, value: object) -> tuple[str, ...]:
    items: Iterable[object] = (value,) if isinstance(value, str) else value  # type: ignore[assignment]
    try:
        excluded = tuple(items)
    except TypeError:
        excluded = (value,)
    if not all(isinstance(item, str) for item in excluded):
        msg = (
            f"inbox_exclude of actor {actor_name!r} must be payload key names (str), got {value!r}"
        )
        raise ConfigurationError(msg)
    try:
        digest_of({}, exclude=excluded)  # type: ignore[arg-type]
    except PayloadEncodingError as error:
        msg = f"inbox_exclude of actor {actor_name!r}: {error.args[0]} (e.g. 'kwargs.trace_id')"
        raise ConfigurationError(msg) from error
    return excluded  # type: ignore[return-value]


def _with_never_retried(throws: object) -> tuple[type[BaseException], ...]:
    if throws is None:
        current: tuple[type[BaseException], ...] = ()
    elif isinstance(throws, tuple):
        current = throws
    else:
        current = (throws,)  # type: ignore[assignment]
    return (*current, *(t for t in NEVER_RETRIED if t not in current))
