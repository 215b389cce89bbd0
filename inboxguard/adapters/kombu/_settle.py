"""The kombu verbs of a settled delivery: ack, a retry copy then ack, reject.

A retry copy is published to the exchange and routing key the delivery
came through, with the message's own properties and the next attempt's
headers; the original is acked only after the copy is published.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from kombu.message import Message
from kombu.messaging import Producer

from inboxguard.adapters._redelivery import Attempt, Step

__all__ = ["VERBS", "perform"]

logger = logging.getLogger("inboxguard.kombu")

_COPIED_PROPERTIES = (
    "message_id",
    "correlation_id",
    "reply_to",
    "timestamp",
    "priority",
    "type",
    "app_id",
    "delivery_mode",
)


ProducerSpec = Producer | Callable[[], Producer] | None
Verb = Callable[[Step, Message, str, Attempt, ProducerSpec], None]


def perform(
    step: Step, message: Message, cid: str, attempt: Attempt, producer: ProducerSpec
) -> None:
    """Do what ``step`` says with the message, by :data:`VERBS`."""
    VERBS[step](step, message, cid, attempt, producer)


def _acked(step: Step, message: Message, cid: str, attempt: Attempt, _: ProducerSpec) -> None:
    _ack(message, cid, "its commit")


def _copied(
    step: Step, message: Message, cid: str, attempt: Attempt, producer: ProducerSpec
) -> None:
    _republish(_producer_for(producer, message), message, attempt.copy_headers(step))
    _ack(message, cid, "its copy was published")


def _rejected(step: Step, message: Message, cid: str, attempt: Attempt, _: ProducerSpec) -> None:
    _reject(message)


#: The kombu verbs of each step: ack; a copy (the next attempt, or this one
#: again) published where the delivery came from, then ack; reject without
#: requeue (also a failure, a step these consumers never reach: they have
#: no failure path of their own).
VERBS: Final[Mapping[Step, Verb]] = {
    Step.ACK: _acked,
    Step.RETRY: _copied,
    Step.REQUEUE: _copied,
    Step.REJECT: _rejected,
    Step.GIVE_UP: _rejected,
    Step.FAIL: _rejected,
}


def _republish(producer: Producer, message: Message, headers: Mapping[str, Any]) -> None:
    info = message.delivery_info or {}
    props = {k: v for k, v in (message.properties or {}).items() if k in _COPIED_PROPERTIES}
    producer.publish(  # type: ignore[no-untyped-call]
        message.body,
        exchange=info.get("exchange") or "",
        routing_key=info.get("routing_key") or "",
        content_type=message.content_type,
        content_encoding=message.content_encoding,
        headers=headers,
        **props,
    )


def _producer_for(producer: ProducerSpec, message: Message) -> Producer:
    if producer is None:
        return Producer(message.channel)  # type: ignore[no-untyped-call]
    if isinstance(producer, Producer):
        return producer
    return producer()


def _ack(message: Message, cid: str, after: str) -> None:
    try:
        message.ack()  # type: ignore[no-untyped-call]
    except Exception:
        logger.warning(
            "ack of %s failed after %s; the redelivery will be acked as a duplicate",
            cid,
            after,
            exc_info=True,
        )


def _reject(message: Message) -> None:
    try:
        message.reject(requeue=False)  # type: ignore[no-untyped-call]
    except Exception:
        logger.warning("reject failed; the redelivery will be refused again", exc_info=True)
