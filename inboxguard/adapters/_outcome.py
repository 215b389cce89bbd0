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
    "log_duplicate",
    "log_refusal",
    "log_requeued",
    "out_of_attempts",
    "outcome_of",
    "refusal_fields",
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
    logger: logging.Logger,
    error: BaseException,
    delivery: Mapping[str, Any] | str,
    *,
    consumer: str | None = None,
    command_id: str | None = None,
    done: str = "rejected without requeue (dead-lettered)",
) -> None:
    """Log a refusal the adapter has handled as one structured line.

    The line names the consumer, the command ID, the reason, the stored and
    incoming digests, what the adapter did (``done``) and the docs anchor of
    the error, and carries the same fields as ``extra`` for a structured
    handler. A refusal the inbox quarantined itself is expected and logs at
    WARNING; any other (no usable command ID, payload or sent time, a payload
    conflict in the outbox or the effect ledger) logs at ERROR with the
    delivery in full. The traceback goes to DEBUG.
    """
    fields = refusal_fields(error, consumer=consumer, command_id=command_id, done=done)
    line = (
        "refused: consumer=%(consumer)s command_id=%(command_id)s reason=%(reason)s"
        " stored_digest=%(stored_digest)s incoming_digest=%(incoming_digest)s;"
        " %(done)s; see %(docs)s"
    )
    if getattr(error, "quarantined", False):
        logger.warning(line, fields, extra=fields)
    else:
        shown = {**fields, "error": str(error), "delivery": delivery}
        logger.error(line + "; %(error)s; the delivery: %(delivery)s", shown, extra=fields)
    logger.debug("traceback of the refusal of %s", fields["command_id"], exc_info=error)


def refusal_fields(
    error: BaseException, *, consumer: str | None, command_id: str | None, done: str
) -> dict[str, Any]:
    """The fields of a refusal's log line (the error's own attributes win)."""
    code = str(getattr(error, "code", None) or type(error).__name__)
    return {
        "consumer": getattr(error, "consumer", None) or consumer,
        "command_id": getattr(error, "command_id", None) or command_id,
        "reason": code.replace("-", "_"),
        "stored_digest": getattr(error, "stored_digest", None),
        "incoming_digest": getattr(error, "incoming_digest", None),
        "done": done,
        "docs": f"docs/errors.md#{code}",
    }


def log_duplicate(logger: logging.Logger, consumer: str, command_id: str, what: str) -> None:
    """Log, at INFO, one line for a delivery skipped as a duplicate."""
    logger.info(
        "duplicate: consumer=%s command_id=%s; %s already processed; skipped, the delivery acked",
        consumer,
        command_id,
        what,
        extra={"consumer": consumer, "command_id": command_id},
    )
