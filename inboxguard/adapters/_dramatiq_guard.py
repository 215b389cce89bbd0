"""The guarded actor function: one transaction around claim, body and result.

The middleware replaces a guarded actor's ``fn`` with a :class:`GuardedFn`, so
the transaction lives inside the actor call itself. Nothing on this path
depends on a middleware hook whose failure Dramatiq would log and swallow:
every outcome is the actor's return value or the exception it raises.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from dramatiq import Retry
from dramatiq.broker import MessageProxy
from sqlalchemy import Connection
from sqlalchemy.orm import Session

from inboxguard._dberrors import is_retryable
from inboxguard._extract import Getter, payload_of
from inboxguard.errors import (
    CommandRejectedError,
    InvalidCommandError,
    PayloadEncodingError,
)
from inboxguard.inbox import Inbox

__all__ = ["NEVER_RETRIED", "GuardedFn", "SessionFactory", "current_message"]

#: Opens a new Session (or Connection) for one message.
SessionFactory = Callable[[], Session | Connection]
#: Errors a redelivery cannot cure: the message is dead-lettered at once.
NEVER_RETRIED: tuple[type[Exception], ...] = (
    CommandRejectedError,
    InvalidCommandError,
    PayloadEncodingError,
)
#: The message the current worker thread is processing (set by the middleware).
current_message: ContextVar[MessageProxy | None] = ContextVar(
    "inboxguard_dramatiq_message", default=None
)


class GuardedFn:
    """An actor function wrapped in the inbox guard.

    Begin, claim, run the body, store its result, commit; then return the
    result (or, for a duplicate, the stored one). A command the inbox refuses
    raises an error listed in the actor's ``throws``; a busy claim or a
    transient database error raises ``dramatiq.Retry``.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        inbox: Inbox,
        session_factory: SessionFactory,
        actor_name: str,
        consumer: str,
        get_id: Getter,
        exclude: tuple[str, ...],
        busy_delay: dt.timedelta,
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.inbox = inbox
        self.session_factory = session_factory
        self.actor_name = actor_name
        self.consumer = consumer
        self.get_id = get_id
        self.exclude = exclude
        self.busy_delay_ms = max(1, int(busy_delay.total_seconds() * 1000))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        message = current_message.get()
        if message is not None and message.actor_name != self.actor_name:
            message = None  # a direct call from inside another actor's body
        try:
            return self._run(message, args, kwargs)
        except NEVER_RETRIED:
            _throw_on_message(message)
            raise
        except Exception as error:
            if is_retryable(error):
                raise Retry(str(error), delay=self._delay()) from error
            raise

    def _run(
        self, message: MessageProxy | None, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        command_id = self.get_id(args, kwargs)
        sent_at = message.message_datetime if message is not None else None
        details = self._details(message, args, kwargs)
        payload = payload_of(args, kwargs)
        guard = self.inbox.guard
        with (
            self.session_factory() as session,
            session.begin(),
            guard(
                session,
                consumer=self.consumer,
                command_id=command_id,
                payload=payload,
                exclude=self.exclude,
                sent_at=sent_at,
                details=details,
            ) as entry,
        ):
            if entry.duplicate:
                return entry.result
            entry.result = result = self.fn(*args, **kwargs)
        return result

    def _details(
        self, message: MessageProxy | None, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        details: dict[str, Any] = {
            "framework": "dramatiq",
            "actor": self.actor_name,
            "args": list(args),
            "kwargs": dict(kwargs),
        }
        if message is not None:
            details["message_id"] = message.message_id
            details["queue"] = message.queue_name
            details["message_timestamp"] = message.message_timestamp
            details["options"] = {k: v for k, v in message.options.items() if k != "traceback"}
        return details

    def _delay(self) -> int:
        return int(self.busy_delay_ms * random.uniform(1.0, 1.5))  # noqa: S311 - jitter


def _throw_on_message(message: MessageProxy | None) -> None:
    """Make sure Retries dead-letters a refused message.

    An actor's ``throws`` already lists :data:`NEVER_RETRIED`, but a
    ``throws`` in the message's own options replaces the actor's, so extend
    that one too.
    """
    if message is None:
        return
    throws = message.options.get("throws")
    if throws is None:
        return
    current = throws if isinstance(throws, tuple) else (throws,)
    message.options["throws"] = (*current, *NEVER_RETRIED)
