"""The effect ledger for a provider call made by an Orch8 step.

The effect key belongs to the step, never to one of its tasks: the engine's
own ``params.idempotency_key`` when the step carries one (loops and for-each
blocks re-run one ``block_id``), else the step identity. A re-offered task
and a retried one (new task ID, ``attempt + 1``) therefore reach the same
ledger record, which returns the stored receipt or settles an unknown
outcome, instead of calling the provider again.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from orch8 import WorkerTask

from inboxguard.adapters.orch8._settle import step_id
from inboxguard.effects import EffectLedger
from inboxguard.effects.provider import Provider, Receipt
from inboxguard.errors import InvalidCommandError

__all__ = ["effect_key", "execute_effect"]


def effect_key(task: WorkerTask, effect: str | None = None) -> str:
    """The ledger key of a step's provider call.

    ``params["idempotency_key"]`` when present, else ``instance_id/block_id``;
    ``effect`` names one call of several (``".../charge"``).

    Raises:
        InvalidCommandError: ``idempotency_key`` is present but not a
            non-empty string.
    """
    params = task.params if isinstance(task.params, Mapping) else {}
    given = params.get("idempotency_key")
    if given is not None and (not isinstance(given, str) or not given):
        msg = (
            f"task {task.id}: params['idempotency_key'] must be a non-empty string, got"
            f" {given!r}; set it to the step's business key or leave it out"
        )
        raise InvalidCommandError(msg)
    base = given or step_id(task)
    return f"{base}/{effect}" if effect else base


async def execute_effect(
    ledger: EffectLedger,
    task: WorkerTask,
    provider: Provider,
    payload: Any,
    *,
    effect: str | None = None,
    lease: dt.timedelta | None = None,
    exclude: Iterable[str] = (),
) -> Receipt:
    """``ledger.execute`` under :func:`effect_key`, in a thread (the ledger is
    synchronous; the event loop keeps heartbeating meanwhile). ``lease`` is
    the ledger's (its default when None).

    It raises whatever ``EffectLedger.execute`` raises, and the
    ``InvalidCommandError`` of :func:`effect_key`.
    """
    key = effect_key(task, effect)
    options: dict[str, Any] = {"exclude": tuple(exclude)}
    if lease is not None:
        options["lease"] = lease
    return await asyncio.to_thread(ledger.execute, key, provider, payload, **options)
