"""How the kit calls a user's handler: a plain function, a Celery task or a
Dramatiq actor, without importing either framework."""

from __future__ import annotations

import datetime as dt
import inspect
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from inboxguard._core import faults, headers
from inboxguard.errors import ConfigurationError, InboxGuardError
from inboxguard.sql.errors import is_retryable
from inboxguard.testing._tap import Crash

if TYPE_CHECKING:
    from inboxguard.testing._record import CaseRecord

__all__ = ["Message", "Target", "attempt", "direct", "wait_for"]

Message = Mapping[str, Any]


class Target:
    """One handler and the way it is called with a message.

    A plain function gets the message as its one argument (``handler(message)``)
    and owns its transaction; a Celery task or a Dramatiq actor gets it as
    keyword arguments (``task(**message)``), as ``delay(**message)`` /
    ``send(**message)`` would, and runs through its adapter's guard. The
    broker's ack comes after the call returns: for a plain function the kit
    reaches the ``before_ack`` point itself, an adapter reaches it inside.
    """

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.sent_at: dt.datetime | None = None
        if hasattr(handler, "apply_async") and hasattr(handler, "request"):
            self.kind = "celery"
        elif hasattr(handler, "actor_name") and hasattr(handler, "send"):
            self.kind = "dramatiq"
        elif inspect.iscoroutinefunction(handler):
            msg = (
                f"handler {getattr(handler, '__name__', handler)!r} is an async def function;"
                " the kit drives sync handlers: wrap it, e.g. lambda m: asyncio.run(handler(m))"
            )
            raise ConfigurationError(msg)
        elif callable(handler):
            self.kind = "plain"
        else:
            msg = (
                f"handler must be a function, a Celery task or a Dramatiq actor,"
                f" got {type(handler).__name__}"
            )
            raise ConfigurationError(msg)

    def stamp(self, sent_at: dt.datetime) -> None:
        """Deliver every later message with ``sent_at`` as its sent time, where
        the adapter reads it: a Celery task's ``x-inbox-sent-at`` header, a
        Dramatiq message's timestamp.

        Raises:
            ConfigurationError: the target carries no sent time (a plain
                function, a task or actor no inboxguard adapter guards).
        """
        if self.kind == "celery" and hasattr(self.handler, "inbox_require_sent_at"):
            self.sent_at = sent_at
            return
        if self.kind == "dramatiq" and hasattr(getattr(self.handler, "fn", None), "delivering"):
            self.sent_at = sent_at
            return
        what = {
            "plain": "a plain function gets no message headers",
            "celery": "the Celery task is not an inboxguard InboxTask",
            "dramatiq": "the actor is not guarded by inboxguard's Dramatiq middleware",
        }[self.kind]
        msg = (
            f"cannot stamp a sent time on {self!r}: {what}, so the replay would run"
            " as a new command; pass sent_at_key='sent_at' and give the guard"
            " sent_at=message['sent_at'] (an ISO-8601 string parsed to a datetime)"
        )
        raise ConfigurationError(msg)

    def __repr__(self) -> str:
        return f"<Target {self.kind} {getattr(self.handler, '__name__', self.handler)!r}>"

    def __call__(self, message: Mapping[str, Any], command_id: str | None) -> Any:
        """Deliver ``message`` once; return what the handler returned."""
        if not isinstance(message, Mapping):
            msg = f"message must be a mapping (the task's keyword arguments), got {message!r}"
            raise ConfigurationError(msg)
        call: Callable[..., Any] = self.handler
        if self.kind == "plain":
            result = call(dict(message))
            faults.reach(faults.FaultPoint.BEFORE_ACK, command_id or "")
            return result
        if self.sent_at is not None:
            return _stamped(self.kind, self.handler, message, self.sent_at)
        return call(**message)


def _stamped(kind: str, handler: Any, message: Mapping[str, Any], sent_at: dt.datetime) -> Any:
    """One delivery of ``message`` carrying ``sent_at`` as a worker receives it:
    a Celery request with the sent-time header (eager, so a retry is never
    published), a Dramatiq message with that timestamp."""
    if kind == "celery":
        handler.push_request(
            id=f"kit-{uuid.uuid4().hex}",
            args=(),
            kwargs=dict(message),
            headers={headers.SENT_AT: sent_at.isoformat()},
            delivery_info={},
            retries=0,
            called_directly=False,
            is_eager=True,
        )
        try:
            return handler(**message)
        finally:
            handler.pop_request()
    from dramatiq import Message as DramatiqMessage  # noqa: PLC0415 - only a Dramatiq target needs it
    from dramatiq.broker import MessageProxy  # noqa: PLC0415

    delivery: DramatiqMessage[Any] = DramatiqMessage(
        queue_name=handler.queue_name,
        actor_name=handler.actor_name,
        args=(),
        kwargs=dict(message),
        options={},
        message_timestamp=int(sent_at.timestamp() * 1000),
    )
    with handler.fn.delivering(MessageProxy(delivery)):
        return handler(**message)


def wait_for(done: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Poll ``done`` until true; raise TimeoutError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            msg = f"timed out after {timeout}s waiting for {what}"
            raise TimeoutError(msg)
        time.sleep(0.005)


def direct(message: Message, run: Callable[[Message], str]) -> str:
    """The default courier: the delivery runs in the calling thread."""
    return run(message)


def attempt(target: Target, message: Message, record: CaseRecord) -> str:
    """One delivery to the handler; its outcome as the broker would see it."""
    try:
        target(message, record.command_id)
    except Crash as crash:
        return f"crashed at {crash.point}"
    except Exception as error:
        settled = _celery_settlement(error)
        if settled is not None:
            return settled
        name = type(error).__name__
        if is_retryable(error):
            return f"retry: {name}"
        if isinstance(error, InboxGuardError):
            return f"dead-lettered: {name}"
        return f"failed: {name}: {error}"
    return "acked"


def _celery_settlement(error: Exception) -> str | None:
    """A Celery ``Reject`` or ``Retry`` from a worker-like delivery, as the
    outcome its cause would have on a plain handler (None for anything else)."""
    kind = {"Reject": "dead-lettered", "Retry": "retry"}.get(type(error).__name__)
    if kind is None or not type(error).__module__.startswith("celery"):
        return None
    cause = error.__cause__ or error.__context__
    return f"{kind}: {type(cause).__name__ if cause is not None else type(error).__name__}"
