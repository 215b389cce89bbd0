"""aio-pika consumers: a message callback that runs each command once, on asyncio.

:func:`guarded` is the asyncio twin of :func:`inboxguard.adapters.kombu.guarded`
(same headers, same outcomes), built on :meth:`inboxguard.Inbox.guard_async`:

====================================  ===============================================
guard outcome                         what happens to the message
====================================  ===============================================
fresh                                 handler awaited, result stored, COMMIT, ack
duplicate (same digest)               ack; the handler does not run
payload mismatch / beyond retention   quarantined (body, headers, properties), then
                                      ``reject(requeue=False)``
in progress / transient DB error /    a copy with ``x-inbox-attempt`` + 1 and an
handler exception                     ``x-inbox-retry-at`` time is published, then
                                      the original is acked; the copy waits (without
                                      blocking the loop) until that time; at
                                      ``max_attempts`` quarantined as
                                      ``retries_exhausted`` and rejected
no usable body, command ID or time    quarantined under the message ID, rejected
no sent time, ``require_sent_at``     quarantined (``missing_sent_at``), rejected
inboxguard error declaring a failure  quarantined under its code, rejected (never
(``ReconciliationRequiredError``)     retried: retrying cannot fix it)
quarantine record not written         a copy of the same attempt, due after
                                      ``retry_delay``, is published, then the
                                      original is acked
====================================  ===============================================

The command ID is, by default, the ``x-inbox-command-id`` header the outbox's
dispatcher stamps; ``command_id=`` (a body key, a callable over the body, or
:func:`from_message`) takes it from elsewhere and wins over the header.
"""

from __future__ import annotations

from inboxguard.adapters._delivery import (
    ATTEMPT_HEADER,
    COMMAND_ID_HEADER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    RETRY_AT_HEADER,
    SENT_AT_HEADER,
    Delivery,
    from_message,
)
from inboxguard.adapters.aio_pika._consumer import guarded

__all__ = [
    "ATTEMPT_HEADER",
    "COMMAND_ID_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "Delivery",
    "from_message",
    "guarded",
]
