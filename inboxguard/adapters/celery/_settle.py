"""The Celery verbs of a settled delivery: return, ``self.retry``, ``Reject``.

The delivery script (``adapters/_script.py``) decides the step; these verbs
only say it in Celery's terms. The task returns and Celery acks after the
commit (``acks_late``); a retry publishes the next attempt with a jittered
countdown (Celery acks this delivery once the copy is out); a refusal and a
last failed attempt raise ``Reject(requeue=False)`` (dead-lettered where the
queue has a dead-letter exchange); a failure goes on to Celery's failure
path; a delivery no quarantine record holds is sent back as a retry even past
``max_retries``. Each verb runs while the attempt's error is being handled,
so what it raises is chained to that error, as Celery's ``retry`` expects.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from celery.exceptions import Reject

from inboxguard.adapters._outcome import log_refusal, log_requeued
from inboxguard.adapters._script import Settlement, Step
from inboxguard.adapters.celery._quiet import logged

__all__ = ["VERBS", "reason_text", "retry_later"]

logger = logging.getLogger("inboxguard.celery")

#: What the worker does with a refused delivery, as its log line says.
_REJECTED = "quarantined, then rejected without requeue (dead-lettered)"

#: A verb: the task, the settlement, the retries already spent.
Verb = Callable[[Any, Settlement, int], None]


def _returned(task: Any, settled: Settlement, retries: int) -> None:
    """Committed or a duplicate: the task returns its result; Celery acks."""


def _failed(task: Any, settled: Settlement, retries: int) -> None:
    """The error goes on to Celery's failure path (its record is written)."""


def _rejected(task: Any, settled: Settlement, retries: int) -> None:
    error = _error_of(settled)
    log_refusal(
        logger,
        error,
        settled.shown,
        consumer=settled.consumer,
        command_id=settled.command_id,
        done=_REJECTED,
    )
    raise logged(Reject(reason_text(error), requeue=False)) from error


def _given_up(task: Any, settled: Settlement, retries: int) -> None:
    error = _error_of(settled)
    msg = f"task {task.name!r} gave up after {retries} retries: {error}"
    raise Reject(msg, requeue=False) from error


def _retried(task: Any, settled: Settlement, retries: int) -> None:
    retry_later(task, _error_of(settled), retries)


def _requeued(task: Any, settled: Settlement, retries: int) -> None:
    error = _error_of(settled)
    log_requeued(logger, error, f"task {task.name} ({task.request.id})")
    retry_later(task, error, retries, beyond_limit=True)


#: The Celery verbs of each step: return; ``Reject(requeue=False)`` for a
#: refusal and a last failed attempt; ``self.retry`` for a retry, and past
#: ``max_retries`` for a delivery no record holds; Celery's failure path.
VERBS: Final[Mapping[Step, Verb]] = {
    Step.ACK: _returned,
    Step.REJECT: _rejected,
    Step.GIVE_UP: _given_up,
    Step.RETRY: _retried,
    Step.REQUEUE: _requeued,
    Step.FAIL: _failed,
}


def retry_later(task: Any, exc: Exception, retries: int, *, beyond_limit: bool = False) -> None:
    """Publish the retry copy (then Celery acks this delivery); ``beyond_limit``
    sends it back even when ``max_retries`` is spent (its record is missing)."""
    cap = max(float(task.retry_backoff_max), task.inbox_retry_base)
    countdown = random.uniform(0, min(cap, task.inbox_retry_base * 2**retries))  # noqa: S311
    if beyond_limit:
        countdown = max(countdown, min(cap, task.inbox_retry_base))
    logger.warning(
        "task %s: %s; retrying in %.1fs (retry %d)", task.name, exc, countdown, retries + 1
    )
    limit = {"max_retries": retries + 1} if beyond_limit else {}
    raise task.retry(exc=Exception(reason_text(exc)), countdown=countdown, **limit)


def reason_text(exc: BaseException) -> str:
    """The text Celery is given for an error.

    The prefork pool pickles Reject/Retry back to the parent process;
    inboxguard's errors take keyword-only arguments and do not unpickle, so
    the framework gets their text.
    """
    return f"{type(exc).__name__}: {exc}"


def _error_of(settled: Settlement) -> Exception:
    assert settled.error is not None  # every step but ACK settles a failed attempt
    return settled.error
