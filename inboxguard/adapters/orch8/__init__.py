"""Orch8 external workers: a task handler run once per step, on ``orch8-io-sdk``.

:func:`guarded` wraps a handler; :class:`InboxWorker` (the SDK's polling
worker) runs it and settles each task itself (the SDK's own ``Orch8Worker``
is refused: a guarded handler it calls raises ``ConfigurationError``):

=====================================  =============================================
guard outcome                          what the worker sends the engine
=====================================  =============================================
fresh                                  handler awaited, result stored, COMMIT, then
                                       ``complete`` with the result
duplicate (same digest)                ``complete`` with the stored result; the
                                       handler does not run
completion refused as stale            logged (404 on engine v0.7.1, 409 with claim
(404 / 409) or lost                    epochs); never a ``fail``: the worker that
                                       holds the task now completes the duplicate
payload mismatch, beyond retention,    quarantined, then ``fail`` non-retryable
no usable command ID, a declared
failure (``ReconciliationRequired``)
in progress / transient DB error /     ``fail`` retryable (the engine creates a new
unknown effect outcome                 task, ``attempt + 1``)
the handler's own exception            ``fail``, retryable when the exception's
                                       ``retryable`` attribute is true (the SDK's rule)
a refusal no quarantine record holds   ``fail`` retryable: offered again, not lost
=====================================  =============================================

The command ID is the step identity ``instance_id/block_id`` unless
``command_id=`` names a key of ``params`` or a callable over the task; the
payload digested is ``params``. :func:`effect_key` and :func:`execute_effect`
key the effect ledger on the step, so a provider call is not repeated by a
re-offered or retried task.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any

from orch8 import WorkerTask

from inboxguard import Inbox
from inboxguard._core.guarantee import Guarantee
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters.orch8._effects import effect_key, execute_effect
from inboxguard.adapters.orch8._guarantee import register_task
from inboxguard.adapters.orch8._settle import STALE_STATUSES, step_id
from inboxguard.adapters.orch8._task import GuardedTask, IdSpec
from inboxguard.adapters.orch8._worker import InboxWorker
from inboxguard.errors import ConfigurationError

__all__ = [
    "STALE_STATUSES",
    "GuardedTask",
    "IdSpec",
    "InboxWorker",
    "effect_key",
    "execute_effect",
    "guarded",
    "step_id",
]


def guarded(  # noqa: PLR0913 - one setting per argument
    handler: Callable[[WorkerTask], Any],
    inbox: Inbox,
    *,
    consumer: str,
    retry_window: dt.timedelta,
    reaper_window: dt.timedelta,
    session_factory: Callable[[], Any] | None = None,
    sync_session_factory: Callable[[], Any] | None = None,
    command_id: IdSpec = None,
    repeats: bool = False,
    exclude: Iterable[str] = (),
    shared_consumer: bool = False,
    guarantee: Guarantee | None = None,
) -> GuardedTask:
    """Return ``handler`` guarded by ``inbox``, for :class:`InboxWorker`'s ``handlers``.

    With ``session_factory`` (an ``async_sessionmaker``) the handler is a
    coroutine function ``handler(task)`` run in an ``AsyncSession``; with
    ``sync_session_factory`` (a ``sessionmaker``) it is a plain function run
    in a thread. It reaches its session
    with :func:`inboxguard.current_session`; its return value (JSON) is
    stored and is the task's output.

    ``retry_window`` is the longest time the engine may keep retrying the
    step (its block's retry policy) and ``reaper_window`` the time after
    which the engine re-offers a task whose worker went quiet; the worker
    refuses to start unless both fit inside the inbox's evidence horizon.
    ``repeats=True`` says the block runs more than once per instance (a loop
    or for-each): the step identity is then the same for every run, so a
    ``command_id`` from ``params`` is required.

    Raises:
        ConfigurationError: an argument cannot keep the guarantees: no or two
            session factories, a command ID spec that cannot compute an ID,
            a repeating block without one from ``params``, a window that is
            not a positive timedelta, or ``consumer`` already another
            handler's on this inbox.
    """
    if (session_factory is None) == (sync_session_factory is None):
        msg = (
            "guarded(): pass exactly one of session_factory= (an async_sessionmaker, for a"
            " coroutine handler) or sync_session_factory= (a sessionmaker, for a plain one)"
        )
        raise ConfigurationError(msg)
    _check_id(command_id, repeats, consumer)
    for name, window in (("retry_window", retry_window), ("reaper_window", reaper_window)):
        if not isinstance(window, dt.timedelta) or window <= dt.timedelta(0):
            msg = f"guarded(): {name} must be a positive timedelta, got {window!r}"
            raise ConfigurationError(msg)
    name = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"
    claim_consumer(inbox, consumer, name, shared=shared_consumer, option="shared_consumer")
    excluded = tuple(exclude)
    register_task(
        inbox,
        name,
        consumer=consumer,
        command_id=command_id,
        exclude=excluded,
        retry_window=retry_window,
        reaper_window=reaper_window,
        guarantee=guarantee,
    )
    return GuardedTask(
        handler,
        inbox,
        consumer=consumer,
        session_factory=session_factory,
        sync_session_factory=sync_session_factory,
        command_id=command_id,
        exclude=excluded,
        retry_window=retry_window,
        reaper_window=reaper_window,
    )


def _check_id(command_id: object, repeats: bool, consumer: str) -> None:
    if command_id is None:
        if repeats:
            msg = (
                f"guarded({consumer!r}, repeats=True): a loop or for-each block re-runs the"
                " same block_id, so the step identity would make every later run a"
                " duplicate of the first; pass command_id='idempotency_key' (or another"
                " params key, or a callable over the task) that differs per run"
            )
            raise ConfigurationError(msg)
        return
    if isinstance(command_id, str):
        if not command_id:
            msg = f"guarded({consumer!r}): command_id must be a non-empty params key"
            raise ConfigurationError(msg)
        return
    if not callable(command_id):
        msg = (
            f"guarded({consumer!r}): command_id must be None (the step identity), a key of"
            f" params, or a callable over the task, got {command_id!r}"
        )
        raise ConfigurationError(msg)
