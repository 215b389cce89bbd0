"""How the kit calls a user's handler: a plain function, a Celery task or a
Dramatiq actor, without importing either framework."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from inboxguard._core import faults
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
        return call(**message)


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
        name = type(error).__name__
        if is_retryable(error):
            return f"retry: {name}"
        if isinstance(error, InboxGuardError):
            return f"dead-lettered: {name}"
        return f"failed: {name}: {error}"
    return "acked"
