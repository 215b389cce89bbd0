"""The session of the guard running in this context."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from inboxguard.errors import NoActiveGuardError

__all__ = ["current_session", "session_var"]

session_var: ContextVar[Any] = ContextVar("inboxguard_session")


def current_session() -> Any:
    """Return the session (or connection) of the inbox guard running in this
    context (thread or asyncio task).

    Adapters use it so a task body can reach the transaction the inbox row is
    written in without taking a session argument.

    Raises:
        NoActiveGuardError: no guard is running in this context.
    """
    try:
        return session_var.get()
    except LookupError:
        msg = (
            "current_session() was called outside an inbox guard; call it from the"
            " body of a guarded handler or task, or use the session you passed to guard()"
        )
        raise NoActiveGuardError(msg) from None
