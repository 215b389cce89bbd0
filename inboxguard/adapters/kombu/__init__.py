"""kombu consumers: a ``(body, message)`` callback that runs each command once.

:func:`guarded` wraps a handler so that, per delivery:

====================================  ===============================================
guard outcome                         what happens to the message
====================================  ===============================================
fresh                                 handler runs, result stored, COMMIT, then ack
duplicate (same digest)               ack; the handler does not run
payload mismatch / beyond retention   quarantined (body, headers, properties), then
                                      ``reject(requeue=False)``
in progress / transient DB error /    a copy carrying ``x-inbox-attempt`` + 1 and a
handler exception                     ``x-inbox-retry-at`` time is published, then
                                      the original is acked; the copy waits until
                                      that time; at ``max_attempts`` quarantined
                                      (``retries_exhausted``) and rejected
no usable command ID or sent time     quarantined under the message ID, rejected
undecodable body (``on_decode_error``  quarantined with the raw body under the
of the Consumer set to the callback's  message ID, rejected (kombu's own default
``on_decode_error``)                   acks it away)
no sent time, ``require_sent_at``     quarantined (``missing_sent_at``), rejected
inboxguard error declaring a failure  quarantined under its code, rejected (never
(``ReconciliationRequiredError``)     retried: retrying cannot fix it)
quarantine record not written         a copy of the same attempt, due after
(database down, pool exhausted)       ``retry_delay``, is published, then the
                                      original is acked; the consumer keeps going
====================================  ===============================================

The command ID is, by default, the ``x-inbox-command-id`` header the outbox's
dispatcher stamps; ``command_id=`` takes it from the body (a key, a callable)
or from the whole message (:func:`from_message`) instead, and then wins over
the header. A message with no sent time (``x-inbox-sent-at`` header or AMQP
``timestamp``) skips the stale-replay check: logged once per consumer, or
refused with ``require_sent_at=True``.

An ack that fails after the commit is logged and harmless: the redelivery is a
duplicate. Callbacks run on the consumer thread; keep transactions (and
``retry_delay``) well below the broker heartbeat interval.
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
from inboxguard.adapters.kombu._consumer import GuardedCallback, guarded

__all__ = [
    "ATTEMPT_HEADER",
    "COMMAND_ID_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "Delivery",
    "GuardedCallback",
    "from_message",
    "guarded",
]
