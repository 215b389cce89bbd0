"""The kombu verbs of a settled delivery: ack, a retry copy then ack, reject.

A retry copy is published to the exchange and routing key the delivery
came through, with the message's own properties and the next attempt's
headers; the original is acked only after the copy is published.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kombu.message import Message
from kombu.messaging import Producer

from inboxguard.adapters._redelivery import Attempt, Step

__all__ = ["perform"]

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


def perform(
    step: Step,
    message: Message,
    cid: str,
    attempt: Attempt,
    producer: Producer | Callable[[], Producer] | None,
) -> None:
    """Do what ``step`` says with the message (retry: publish the copy, then ack)."""
    if step is Step.ACK:
        _ack(message, cid, "its commit")
    elif step in (Step.RETRY, Step.REQUEUE):
        headers = attempt.next_headers() if step is Step.RETRY else attempt.requeue_headers()
        _republish(_producer_for(producer, message), message, headers)
        _ack(message, cid, "its copy was published")
    else:
        _reject(message)


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


def _producer_for(producer: Producer | Callable[[], Producer] | None, message: Message) -> Producer:
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
