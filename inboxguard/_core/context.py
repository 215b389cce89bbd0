"""The session of the guard running in this context."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from inboxguard.errors import NoActiveGuardError

__all__ = ["adapter_settles_var", "current_entry", "current_session", "entry_var", "session_var"]

session_var: ContextVar[Any] = ContextVar("inboxguard_session")
entry_var: ContextVar[Any] = ContextVar("inboxguard_entry")
#: True while an adapter's delivery transaction runs: the adapter writes the one
#: log line of a refusal it settles, so the inbox writes its own at DEBUG.
adapter_settles_var: ContextVar[bool] = ContextVar("inboxguard_adapter_settles", default=False)


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


def current_entry() -> Any:
    """Return the :class:`~inboxguard.InboxEntry` of the inbox guard running in
    this context (thread or asyncio task), or, once it has ended, of the last
    one that ran in it.

    ``entry.duplicate`` tells a replayed delivery (the stored result handed
    back, the handler not run again) from a fresh one. Inside a guarded
    block it describes the running command; right after a guarded call (a
    Celery ``task_postrun`` signal, a Dramatiq ``after_process_message``
    hook, the line after an ``Inbox.handler`` function returns) it describes
    the call that just ended, until the next guard in the same context.

    Raises:
        NoActiveGuardError: no guard has run in this context.
    """
    try:
        return entry_var.get()
    except LookupError:
        msg = (
            "current_entry() was called where no inbox guard has run; call it from a"
            " guarded handler or task, or right after a guarded call in the same thread"
            " or asyncio task"
        )
        raise NoActiveGuardError(msg) from None
