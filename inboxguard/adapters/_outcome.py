"""The one outcome policy every adapter maps a failed delivery through.

:func:`inboxguard._core.outcome.classify` with the database layer's judgement
of foreign errors (lock timeouts, deadlocks, lost connections are transient).
The adapters translate the :class:`Outcome` into their framework's verbs and
decide nothing themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from inboxguard._core.outcome import Disposition, Outcome, classify, out_of_attempts
from inboxguard.sql.errors import is_retryable, is_unreachable

__all__ = [
    "Disposition",
    "Outcome",
    "log_refusal",
    "log_requeued",
    "out_of_attempts",
    "outcome_of",
]


def outcome_of(
    error: BaseException,
    *,
    last_attempt: Callable[[], bool] = lambda: False,
    retry_failures: bool = False,
    failure_path_retries: bool = False,
    transient: tuple[type[BaseException], ...] = (),
) -> Outcome:
    """The outcome of a delivery that raised ``error`` (see ``classify``).

    A foreign error is a retry when :func:`inboxguard.sql.errors.is_retryable`
    says so (a busy claim, a transient or unreachable database) or when it is
    one of the framework's own ``transient`` errors (Celery's soft time
    limit), else a failure.

    A delivery whose last attempt failed because the database is unreachable
    is not quarantined (the write would fail, or race the database's return):
    it goes back to the broker (``requeued``) and keeps its attempt count, so
    an outage longer than the retry schedule loses nothing and stops nothing.
    """

    def is_transient(exc: BaseException) -> bool:
        return isinstance(exc, transient) or is_retryable(exc)

    outcome = classify(
        error,
        is_transient=is_transient,
        last_attempt=last_attempt,
        retry_failures=retry_failures,
        failure_path_retries=failure_path_retries,
    )
    if outcome.exhausted and is_unreachable(error):
        return outcome.recorded(written=False)
    return outcome


def log_requeued(logger: logging.Logger, error: BaseException, what: str) -> None:
    """Log, at ERROR, a delivery sent back to the broker because no quarantine
    record holds it (the write failed): it is neither acked nor dead-lettered."""
    logger.error(
        "%s: no quarantine record holds it (the database is unreachable or the write"
        " failed: %r); the delivery goes back to the broker and is neither acked nor"
        " dead-lettered",
        what,
        error,
    )


def log_refusal(
    logger: logging.Logger, error: BaseException, delivery: Mapping[str, Any] | str
) -> None:
    """Log a refused delivery that no quarantine record holds, in full.

    The inbox already quarantined a delivery whose error says ``quarantined``;
    any other refusal (no usable command ID, payload or sent time, a payload
    conflict in the outbox or the effect ledger) exists only in this log line
    and in the dead-letter queue.
    """
    if getattr(error, "quarantined", False):
        return
    logger.error("refused %r; the delivery is logged here in full: %s", error, delivery)
