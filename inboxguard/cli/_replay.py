"""The message a quarantine record is replayed as: what the adapter stored
of the refused delivery, handed to an outbox transport.

The kombu and aio-pika consumers store the decoded ``body``, the
``headers``, the AMQP ``properties`` and the ``routing_key``; the Celery and
Dramatiq adapters store the call's ``args`` and ``kwargs`` with the ``task``
or ``actor`` name. Either is turned into an :class:`~inboxguard.OutboxMessage`
under the record's command ID, so the transport the outbox dispatcher uses
(``transport(OutboxMessage) -> receipt``) publishes it again.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from inboxguard._core import headers as vocabulary
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import QuarantineRecord
from inboxguard.outbox import OutboxMessage

__all__ = ["describe", "replay_message"]

#: Headers of the retry path: a replay starts again at the first attempt.
_RETRY_HEADERS = frozenset({vocabulary.ATTEMPT, vocabulary.RETRY_AT})


def replay_message(
    record: QuarantineRecord, destination: str | None, now: dt.datetime
) -> OutboxMessage:
    """The stored message of ``record``, to be sent to ``destination`` (default:
    where it was delivered from).

    Raises:
        ConfigurationError: the record keeps no message to replay, or no
            destination is stored and none is given.
    """
    details = record.details or {}
    if "body" in details:
        payload = details["body"]
        stored = dict(details.get("headers") or {})
        headers = {k: v for k, v in stored.items() if k not in _RETRY_HEADERS}
        where = destination or details.get("routing_key")
    elif "args" in details or "kwargs" in details:
        payload = {"args": list(details.get("args") or []), "kwargs": details.get("kwargs") or {}}
        sent_at = vocabulary.sent_at_of(details.get("headers"))
        headers = {} if sent_at is None else {vocabulary.SENT_AT: sent_at}
        where = destination or details.get("task") or details.get("actor")
    else:
        msg = (
            f"quarantine record {record.id} keeps no message to replay (its details hold"
            " neither a body nor task arguments); publish the command again from its source"
        )
        raise ConfigurationError(msg)
    if not where:
        msg = (
            f"quarantine record {record.id} does not say where its message came from;"
            " pass --destination (the queue, routing key, task or actor name)"
        )
        raise ConfigurationError(msg)
    headers[vocabulary.COMMAND_ID] = record.command_id
    return OutboxMessage(
        command_id=record.command_id,
        destination=str(where),
        payload=payload,
        headers=headers,
        digest=record.incoming_digest,
        created_at=now,
    )


def describe(message: OutboxMessage) -> dict[str, Any]:
    """What the CLI prints of a replayed message."""
    return {"command_id": message.command_id, "destination": message.destination}
