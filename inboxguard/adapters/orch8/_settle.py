"""The Orch8 verbs of a settled task: complete it, fail it retryably, fail it for good.

The engine keeps the attempt count and the retry schedule (the block's retry
policy): a retry or a requeue is a retryable ``fail`` (the engine creates a
new task, ``attempt + 1``), a refusal or a last attempt a non-retryable one.
A completion or failure the engine refuses as stale (404 on v0.7.1, 409 on
the engine's main) means another worker holds the task now; it is logged and
nothing else is sent: that worker's run is a duplicate and completes with the
stored result.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from orch8 import Orch8Client, Orch8Error, WorkerTask

from inboxguard.adapters._redelivery import Step

__all__ = ["STALE_STATUSES", "VERBS", "Report", "step_id"]

logger = logging.getLogger("inboxguard.orch8")

#: How the engine answers a worker that no longer holds the task: 404 on
#: v0.7.1, 409 (``conflict: worker task lease changed``) with claim epochs.
STALE_STATUSES = frozenset({404, 409})


def step_id(task: WorkerTask) -> str:
    """The step's identity across re-offers and retries: ``instance_id/block_id``."""
    return f"{task.instance_id}/{task.block_id}"


@dataclass(frozen=True, slots=True)
class Report:
    """Where a task's settlement goes: the engine's client, as this worker."""

    client: Orch8Client
    task: WorkerTask
    worker_id: str

    async def perform(self, step: Step, value: Any) -> None:
        """Do what ``step`` says with the task, by :data:`VERBS` (``value``: the
        output of a completed task, else the error it failed with)."""
        await VERBS[step](self, value)


async def _completed(report: Report, output: Any) -> None:
    await _send(
        report.client.complete_task(report.task.id, report.worker_id, output),
        "complete",
        report.task,
    )


async def _failed_retryably(report: Report, error: Any) -> None:
    await _fail(report, error, retryable=True)


async def _failed_for_good(report: Report, error: Any) -> None:
    await _fail(report, error, retryable=False)


async def _fail(report: Report, error: Any, *, retryable: bool) -> None:
    call = report.client.fail_task(
        report.task.id, report.worker_id, str(error) or repr(error), retryable=retryable
    )
    await _send(call, "fail", report.task)


#: The Orch8 verbs of each step: ``complete`` with the output; ``fail``
#: retryable (the engine retries: the next attempt, or this one again);
#: ``fail`` non-retryable.
VERBS: Final[Mapping[Step, Callable[[Report, Any], Awaitable[None]]]] = {
    Step.ACK: _completed,
    Step.RETRY: _failed_retryably,
    Step.REQUEUE: _failed_retryably,
    Step.REJECT: _failed_for_good,
    Step.GIVE_UP: _failed_for_good,
    # The handler's own failure is settled as the verb its ``retryable`` picks
    # (``step_of(..., failure=...)``), so FAIL is never reached: failed for good.
    Step.FAIL: _failed_for_good,
}


async def _send(call: Awaitable[None], what: str, task: WorkerTask) -> None:
    """Send a completion or a failure; never turn its own failure into another call."""
    try:
        await call
    except Orch8Error as error:
        if error.status in STALE_STATUSES:
            logger.warning(
                "task %s (%s): the engine refused the %s with %d: this worker no longer"
                " holds the task (its lease lapsed and it was offered again); the worker"
                " that holds it now gets the stored result from the inbox",
                task.id,
                step_id(task),
                what,
                error.status,
            )
            return
        logger.error("task %s: the %s was not accepted: %s", task.id, what, error)
    except Exception as error:
        logger.error(
            "task %s: the %s was lost (%r); the engine offers the task again once its"
            " lease lapses, and the inbox turns that run into a duplicate",
            task.id,
            what,
            error,
        )
