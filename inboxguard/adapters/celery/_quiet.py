"""Keep one log line per refusal the guarded task has already logged.

Celery logs every ``Reject`` at WARNING with its whole traceback (the
``celery.app.trace`` logger); for a refusal the adapter handled, quarantined
and logged as one structured line, that repeats the message and its digests
twice more. The task marks such a ``Reject`` as logged, and this filter drops
Celery's record of it; every other ``Reject`` keeps Celery's own line.
"""

from __future__ import annotations

import logging

from celery.exceptions import Reject

__all__ = ["install_filter", "logged"]

#: The logger of Celery's task tracer.
TRACE_LOGGER = "celery.app.trace"
_MARK = "_inboxguard_logged"


class _LoggedRejects(logging.Filter):
    """Drop the tracer's record of a ``Reject`` the adapter already logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not getattr(error, _MARK, False)


def logged(reject: Reject) -> Reject:
    """``reject``, marked as logged by the adapter."""
    setattr(reject, _MARK, True)
    return reject


def install_filter() -> None:
    """Add the filter to Celery's tracer logger once."""
    trace = logging.getLogger(TRACE_LOGGER)
    if not any(isinstance(f, _LoggedRejects) for f in trace.filters):
        trace.addFilter(_LoggedRejects())
