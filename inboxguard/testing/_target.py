"""How the kit calls a user's handler: a plain function, a Celery task or a
Dramatiq actor, without importing either framework."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from inboxguard._core import faults
from inboxguard.errors import ConfigurationError

__all__ = ["Target"]


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
