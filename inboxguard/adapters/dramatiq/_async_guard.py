"""The guarded ``async def`` actor: the async twin of ``GuardedFn``.

Dramatiq runs an async actor by wrapping its coroutine function with
``dramatiq.asyncio.async_to_sync``: the worker thread submits the coroutine to
the event loop thread of the ``AsyncIO`` middleware and waits for it. The
middleware gives Dramatiq a coroutine function of the same shape: begin,
claim with :meth:`Inbox.guard_async`, await the body, store its result,
commit. It drives the same delivery script as the synchronous wrapper, with
the same Dramatiq verbs (:meth:`GuardCore.settle`); only the I/O is awaited.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import Any, cast

from dramatiq import Actor
from dramatiq.asyncio import async_to_sync, get_event_loop_thread, set_event_loop_thread
from dramatiq.broker import MessageProxy
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from inboxguard import ConfigurationError, Inbox
from inboxguard.adapters._drive import drive_async
from inboxguard.adapters._evidence import record_refusal_async
from inboxguard.adapters._outcome import log_duplicate
from inboxguard.adapters._results import dramatiq_reads, kept
from inboxguard.adapters._script import Record, Run, deliver
from inboxguard.adapters._transaction import transaction_async
from inboxguard.adapters.dramatiq._guard import GuardCore, logger

__all__ = [
    "AsyncGuard",
    "AsyncSessionFactory",
    "async_guarded",
    "coroutine_fn_of",
    "stop_event_loop_thread",
]

#: Opens a new AsyncSession (or AsyncConnection) per message.
AsyncSessionFactory = Callable[[], AsyncSession | AsyncConnection]
AsyncFn = Callable[..., Coroutine[Any, Any, Any]]


class AsyncGuard(GuardCore):
    """Runs one call of an async actor inside the inbox guard."""

    def __init__(
        self, fn: AsyncFn, *, async_session_factory: AsyncSessionFactory, **config: Any
    ) -> None:
        super().__init__(**config)
        self.fn = fn
        self.session_factory = async_session_factory

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        """One attempt, through the same delivery script as ``GuardedFn.__call__``."""
        call = self.new_call()
        result: list[Any] = []

        async def run(given: Run) -> None:
            result.append(await self._run(given, call.message, args, kwargs))

        reading = self.reading(call, args, kwargs)
        settled = await drive_async(deliver(reading, self.rules), run, self._record)
        raised = self.settle(call, settled)
        if raised is None:
            return result[0]
        if raised is settled.error:
            raise raised
        raise raised from settled.error

    async def _run(
        self,
        given: Run,
        message: MessageProxy | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        async with (
            self.session_factory() as session,
            transaction_async(session, self.inbox, self.consumer, given.command_id),
            self.inbox.guard_async(
                session,
                consumer=self.consumer,
                command_id=given.command_id,
                payload=given.payload,
                exclude=self.exclude,
                sent_at=given.sent_at,
                details=given.details,
            ) as entry,
        ):
            if entry.duplicate:
                log_duplicate(logger, self.consumer, given.command_id, f"actor {self.actor_name}:")
                return entry.result
            result = await self.fn(*args, **kwargs)
            kept(entry, result, read=dramatiq_reads(self.broker, message))
        return result

    async def _record(self, request: Record) -> bool:
        """Whether a quarantine record now holds the delivery (written on a
        connection of its own)."""
        try:
            engine = await self._engine()
        except Exception:
            return False
        # InboxMiddleware takes async actors only with a store of AsyncSessions.
        inbox = cast("Inbox", self.inbox)
        return await record_refusal_async(
            inbox, engine, request.error, request.refused, request.reason
        )

    async def _engine(self) -> AsyncEngine:
        async with self.session_factory() as session:
            if isinstance(session, AsyncSession):
                return (await session.connection()).engine
            return session.engine


def async_guarded(guard: AsyncGuard) -> AsyncFn:
    """The coroutine function Dramatiq runs on its event loop thread.

    It carries the original function's name and ``__wrapped__``, so the actor
    stays recognisably async (``inspect.iscoroutinefunction``).
    """

    @functools.wraps(guard.fn)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        return await guard.call(*args, **kwargs)

    return guarded


async def _probe() -> None:
    """Only here to recognise the wrapper ``async_to_sync`` builds."""


#: The code object of Dramatiq's ``async_to_sync`` wrapper.
_ASYNC_TO_SYNC_CODE = async_to_sync(_probe).__code__


def coroutine_fn_of(actor: Actor[Any, Any]) -> Any:
    """The coroutine function of an async actor, or None for a sync actor.

    Dramatiq replaces an ``async def`` actor's function with its
    ``async_to_sync`` wrapper before this middleware sees it; peel exactly
    that layer (decorators of the user's own stay in place).

    Raises:
        ConfigurationError: the function wraps a coroutine function some
            other way, so it cannot be told whether it runs on a loop.
    """
    fn = actor.fn
    if getattr(fn, "__code__", None) is _ASYNC_TO_SYNC_CODE:
        inner = fn.__wrapped__  # type: ignore[attr-defined]
        if inspect.iscoroutinefunction(inner):
            return inner
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn)):
        msg = (
            f"actor {actor.actor_name!r} wraps an async def function in a way InboxMiddleware"
            " cannot guard; declare the async def function itself as the actor"
        )
        raise ConfigurationError(msg)
    return None


def stop_event_loop_thread() -> None:
    """Stop the event loop thread an ``AsyncIO`` middleware listed before this
    one has already started: the worker will not start, so nothing else stops
    it, and its non-daemon thread would keep the refused process alive."""
    thread = get_event_loop_thread()
    if thread is not None:
        thread.stop()  # type: ignore[no-untyped-call]
        set_event_loop_thread(None)
