"""What the kombu and aio-pika adapters read from a delivery: attempt and
retry-at headers, command IDs, sent times.

Where the command ID comes from (``command_id=`` of either ``guarded``):

* nothing given: the ``x-inbox-command-id`` header the outbox's dispatcher
  stamps on each message; a message without it is refused (no usable ID);
* a string: that key of the decoded body;
* a callable: called with the decoded body;
* :func:`from_message` around a callable: called with the whole
  :class:`Delivery` (body, headers, properties).

An explicit ``command_id=`` wins over the header: the consumer takes its ID
where its author said, whoever published the message.

Imports no framework. The header names come from :mod:`inboxguard._core.headers`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inboxguard._core import headers as _headers
from inboxguard._core.identity import as_id
from inboxguard.errors import ConfigurationError, InvalidCommandError

__all__ = [
    "ATTEMPT_HEADER",
    "COMMAND_ID_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "Delivery",
    "FromMessage",
    "attempt_of",
    "check_retry_policy",
    "from_message",
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
#: wins over the AMQP ``timestamp`` property.
SENT_AT_HEADER = _headers.SENT_AT
#: Header with the business command ID the outbox's dispatcher stamps (also the
#: AMQP ``message_id``); the default source of a guarded consumer's command ID.
COMMAND_ID_HEADER = _headers.COMMAND_ID


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message as a :func:`from_message` callable sees it: the decoded
    ``body``, the application ``headers`` and the broker ``properties``
    (``message_id``, ``correlation_id``, ``timestamp``, ...)."""

    body: Any
    headers: Mapping[str, Any] = field(default_factory=dict)
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FromMessage:
    """A ``command_id`` callable over the whole :class:`Delivery` (made by
    :func:`from_message`)."""

    fn: Callable[[Delivery], Any]


def from_message(fn: Callable[[Delivery], Any]) -> FromMessage:
    """Mark ``fn`` as a ``command_id`` over the whole message: it is called
    with a :class:`Delivery` (body, headers, properties) instead of the body,
    e.g. ``from_message(lambda d: d.properties["correlation_id"])``."""
    if not callable(fn):
        msg = f"from_message() takes a callable over a Delivery, got {fn!r}"
        raise ConfigurationError(msg)
    return FromMessage(fn)


IdSpec = Callable[[Any], Any] | str | FromMessage | None


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


def id_getter(spec: IdSpec) -> Callable[[Delivery], Any]:
    """Command ID of a :class:`Delivery`, as ``spec`` says (see the module
    docstring): None (the outbox's header), a body key, a callable over the
    body, or :func:`from_message`.

    Raises:
        ConfigurationError: ``spec`` is none of these.
    """
    if spec is None:
        return _outbox_id
    if isinstance(spec, FromMessage):
        return lambda delivery: as_id(spec.fn(delivery))
    if callable(spec):
        return lambda delivery: as_id(spec(delivery.body))
    if isinstance(spec, str):
        return lambda delivery: as_id(_key(delivery.body, spec))
    msg = (
        "command_id must be a key of the body, a callable over the body, from_message(fn)"
        f" or None (the {COMMAND_ID_HEADER} header), got {spec!r}"
    )
    raise ConfigurationError(msg)


def _outbox_id(delivery: Delivery) -> Any:
    value = (delivery.headers or {}).get(COMMAND_ID_HEADER)
    if value is None:
        msg = (
            f"the message has no {COMMAND_ID_HEADER} header (the outbox's dispatcher stamps"
            " it); publish it through the outbox, or pass command_id= (a body key, a"
            " callable over the body, or from_message(fn)) to take the ID from elsewhere"
        )
        raise InvalidCommandError(msg)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return as_id(value)


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
