"""What the kombu and aio-pika adapters read from a delivery: attempt and
retry-at headers, command IDs, sent times.

Imports no framework. The header names come from :mod:`inboxguard._core.headers`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from inboxguard._core import headers as _headers
from inboxguard._core.identity import as_id
from inboxguard.errors import ConfigurationError, InvalidCommandError

__all__ = [
    "ATTEMPT_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "attempt_of",
    "check_retry_policy",
    "id_getter",
    "judged_from",
    "message_key",
    "parse_sent_at",
    "retry_headers",
    "seconds_until_due",
    "sent_at_from",
]

#: Deliveries of one message before it is quarantined as ``retries_exhausted``.
DEFAULT_MAX_ATTEMPTS = 5
#: Minimum spacing between two attempts of one message.
DEFAULT_RETRY_DELAY = dt.timedelta(seconds=1)
#: Header counting deliveries of one message through the retry path (first = 1).
ATTEMPT_HEADER = _headers.ATTEMPT
#: Header (epoch seconds) before which a retried copy is not processed.
RETRY_AT_HEADER = _headers.RETRY_AT
#: Header with the time the command was sent (ISO 8601 or epoch seconds); it
#: wins over the AMQP ``timestamp`` property. The legacy spelling
#: ``x-inboxguard-sent-at`` is read too.
SENT_AT_HEADER = _headers.SENT_AT


def check_retry_policy(max_attempts: int, retry_delay: dt.timedelta) -> float:
    """Validate the retry settings; return the delay in seconds.

    Raises:
        ConfigurationError: ``max_attempts`` is not positive or ``retry_delay`` negative.
    """
    if not isinstance(max_attempts, int) or max_attempts < 1:
        msg = f"max_attempts must be a positive int, got {max_attempts!r}"
        raise ConfigurationError(msg)
    if not isinstance(retry_delay, dt.timedelta) or retry_delay < dt.timedelta(0):
        msg = f"retry_delay must be a non-negative timedelta, got {retry_delay!r}"
        raise ConfigurationError(msg)
    return retry_delay.total_seconds()


def id_getter(spec: Callable[[Any], Any] | str) -> Callable[[Any], Any]:
    """Command ID from a decoded body: a callable over it, or a key of it."""
    if callable(spec):
        return lambda body: as_id(spec(body))
    if isinstance(spec, str):
        return lambda body: as_id(_key(body, spec))
    msg = f"command_id must be a callable over the body or a key of it, got {spec!r}"
    raise ConfigurationError(msg)


def _key(body: Any, key: str) -> Any:
    if not isinstance(body, Mapping) or key not in body:
        msg = f"the message body has no {key!r} key to take the command_id from; got {body!r}"
        raise InvalidCommandError(msg)
    return body[key]


def attempt_of(headers: Mapping[str, Any]) -> int:
    """The delivery's attempt number (1 without the header)."""
    try:
        return max(1, int(headers.get(ATTEMPT_HEADER, 1)))
    except (TypeError, ValueError):
        return 1


def seconds_until_due(headers: Mapping[str, Any], delay: float) -> float:
    """How long a retried copy still waits; never more than one ``delay``."""
    try:
        due = float(headers.get(RETRY_AT_HEADER, 0))
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, min(due - time.time(), delay))


def retry_headers(headers: Mapping[str, Any], attempt: int, delay: float) -> dict[str, Any]:
    """Headers of the copy published for the next attempt."""
    return {**headers, ATTEMPT_HEADER: attempt + 1, RETRY_AT_HEADER: time.time() + delay}


def sent_at_from(headers: Mapping[str, Any], fallback: Any = None) -> dt.datetime | None:
    """The sent time from the headers (either spelling), else from ``fallback``
    (the AMQP ``timestamp`` property).

    Raises:
        InvalidCommandError: the value found is not a time.
    """
    raw = _headers.sent_at_of(headers)
    return parse_sent_at(fallback if raw is None else raw)


def parse_sent_at(raw: Any) -> dt.datetime | None:
    """A sent time from a header or the AMQP timestamp (naive means UTC).

    Raises:
        InvalidCommandError: ``raw`` is not a time.
    """
    if raw is None:
        return None
    if isinstance(raw, bytes):
        raw = raw.decode(errors="replace")
    if isinstance(raw, dt.datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=dt.UTC)
    try:
        if isinstance(raw, int | float):
            return dt.datetime.fromtimestamp(raw, dt.UTC)
        parsed = dt.datetime.fromisoformat(str(raw))
    except (ValueError, OverflowError, OSError):
        msg = (
            f"the {SENT_AT_HEADER} header or timestamp property {raw!r} is not a time;"
            " send ISO 8601 or epoch seconds"
        )
        raise InvalidCommandError(msg) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def judged_from(sent_at: dt.datetime | None, due_at: dt.datetime | None) -> dt.datetime | None:
    """The time a delivery's age counts from: the later of its sent time and
    its due time (a Celery ``eta``/``countdown``, a Dramatiq ``delay``).

    A delayed message was never deliverable before it was due, so waiting for
    that is not age. Pass no ``due_at`` for a retried copy (its due time is
    the retry's backoff): a retry keeps ageing from the first sent time.
    """
    if sent_at is None or due_at is None:
        return sent_at
    return max(sent_at, due_at)


def message_key(message_id: object, body: bytes | str) -> str:
    """What a quarantine record of a delivery without a usable command ID is
    filed under: its message ID, else a digest of its raw body."""
    if message_id:
        return str(message_id)
    raw = body.encode() if isinstance(body, str) else bytes(body)
    return "sha256-" + hashlib.sha256(raw).hexdigest()
