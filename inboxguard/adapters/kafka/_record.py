"""What the Kafka consumer reads from a record: headers, body, command ID,
sent time, and what a quarantine record keeps of it.

The command ID comes, in this order of precedence, from what the consumer
declares:

* nothing: the ``x-inbox-command-id`` header the outbox's dispatcher stamps;
* a string: that field of the decoded body;
* a callable: called with the whole ``ConsumerRecord`` (its key, headers,
  value, topic, partition, offset), returning the ID.

The record's key is never the command ID unless a callable says so: a key
names the entity whose messages must stay in order (an account, an order),
and every command about that entity carries the same key.

Imports no Kafka client: a record is read through its attributes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

from inboxguard._core import headers as _headers
from inboxguard._core.identity import as_id
from inboxguard.adapters._delivery import COMMAND_ID_HEADER, Delivery, id_getter, parse_sent_at
from inboxguard.errors import ConfigurationError, InvalidCommandError

__all__ = ["RecordId", "details_of", "headers_of", "id_of", "position_of", "sent_time_of"]

#: None (the outbox's header), a body field, or a callable over the record.
RecordId = str | Callable[[Any], Any] | None
#: Kafka's ``timestamp_type`` of a producer's own time (``CreateTime``).
_CREATE_TIME = 0


def headers_of(record: Any) -> dict[str, Any]:
    """The record's headers as a dict of text values (the last of a repeated key)."""
    found: dict[str, Any] = {}
    for key, value in record.headers or ():
        found[key] = value.decode(errors="replace") if isinstance(value, bytes) else value
    return found


def id_of(spec: RecordId) -> Callable[[Any, Any, Mapping[str, Any]], str]:
    """``(record, body, headers) -> command ID``, as ``spec`` says.

    Raises:
        ConfigurationError: ``spec`` is no body field, callable or None.
    """
    if callable(spec):
        fn = spec
        return lambda record, _body, _headers: as_id(fn(record))
    if spec is None:
        return lambda _record, _body, headers: _header_id(headers)
    if isinstance(spec, str):
        get = id_getter(spec)
        return lambda _record, body, headers: as_id(get(Delivery(body, headers)))
    msg = (
        "command_id must be the name of a body field (str), a callable over the"
        f" ConsumerRecord, or None (the {COMMAND_ID_HEADER} header the outbox stamps),"
        f" got {spec!r}; the record key is never taken by default (it names an entity,"
        " not a command)"
    )
    raise ConfigurationError(msg)


def _header_id(headers: Mapping[str, Any]) -> str:
    value = headers.get(COMMAND_ID_HEADER)
    if value is None:
        msg = (
            f"the record has no {COMMAND_ID_HEADER} header (the outbox's dispatcher stamps"
            " it); relay it through the outbox, or pass command_id= (a body field, or a"
            " callable over the ConsumerRecord) to take the ID from elsewhere"
        )
        raise InvalidCommandError(msg)
    return str(as_id(value))


def sent_time_of(record: Any, headers: Mapping[str, Any]) -> dt.datetime | None:
    """When the command was sent: the ``x-inbox-sent-at`` header, else the
    record's ``CreateTime`` timestamp (a broker's ``LogAppendTime`` is when the
    broker wrote it, which a retry of the producer renews).

    Raises:
        InvalidCommandError: the header is not a time.
    """
    raw = _headers.sent_at_of(headers)
    if raw is not None:
        return parse_sent_at(raw)
    if getattr(record, "timestamp_type", None) == _CREATE_TIME and record.timestamp is not None:
        return dt.datetime.fromtimestamp(record.timestamp / 1000, dt.UTC)
    return None


def position_of(record: Any) -> str:
    """``topic/partition@offset``: where the record sits (a quarantine key)."""
    return f"{record.topic}/{record.partition}@{record.offset}"


def details_of(record: Any, body: Any, headers: Mapping[str, Any], attempt: int) -> dict[str, Any]:
    """What a quarantine record keeps of the record."""
    key = record.key
    return {
        "body": body,
        "headers": dict(headers),
        "properties": {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": key.decode(errors="replace") if isinstance(key, bytes) else key,
        },
        "broker": "kafka",
        "attempt": attempt,
    }
