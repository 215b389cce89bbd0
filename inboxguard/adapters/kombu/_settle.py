"""The kombu verbs of a settled delivery: ack, a retry copy then ack, hand
back (requeue), reject.

A retry copy goes back to the queue the delivery came from, on the route
``inboxguard.adapters._route`` picks (the default exchange under the
consumed queue's name), with the message's own properties and the next
attempt's headers; the original is acked only after the copy is published.
A delivery with no known route (it came through another exchange and the
callback was not told its queue) is handed back to the broker as it is,
never copied to its exchange, where other queues may be bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from kombu.message import Message
from kombu.messaging import Producer

from inboxguard.adapters._redelivery import Attempt, Step
from inboxguard.adapters._route import retry_key

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
#: Where a copy is published from: the producer, and the consumed queue's
#: name (None: not known).
Route = tuple[ProducerSpec, str | None]
Verb = Callable[[Step, Message, str, Attempt, Route], None]


def perform(step: Step, message: Message, cid: str, attempt: Attempt, route: Route) -> None:
    """Do what ``step`` says with the message, by :data:`VERBS`."""
    VERBS[step](step, message, cid, attempt, route)


def _acked(step: Step, message: Message, cid: str, attempt: Attempt, _: Route) -> None:
    _ack(message, cid, "its commit")


def _copied(step: Step, message: Message, cid: str, attempt: Attempt, route: Route) -> None:
    """Publish the copy back to the consumed queue, then ack; a delivery
    with no known route is handed back instead."""
    producer, queue = route
    info = message.delivery_info or {}
    key = retry_key("", queue, info.get("exchange"), info.get("routing_key"))
    if key is None:
        logger.error(
            "message %s came through exchange %r: a copy sent back there under %r would"
            " reach every queue bound to it; it goes back to the broker as it is. Pass"
            " guarded(..., queue=<the consumed queue>) so retries go back to it alone",
            cid,
            info.get("exchange"),
            info.get("routing_key"),
        )
        _requeue(message)
        return
    _republish(_producer_for(producer, message), message, key, attempt.copy_headers(step))
    _ack(message, cid, "its copy was published")


def _rejected(step: Step, message: Message, cid: str, attempt: Attempt, _: Route) -> None:
    _reject(message)


#: The kombu verbs of each step: ack; a copy (the next attempt, or this one
#: again) published back to the consumed queue, then ack, or hand back
#: (requeue) when no route is known; reject without requeue (also a
#: failure, a step these consumers never reach: they have no failure path
#: of their own).
VERBS: Final[Mapping[Step, Verb]] = {
    Step.ACK: _acked,
    Step.RETRY: _copied,
    Step.REQUEUE: _copied,
    Step.REJECT: _rejected,
    Step.GIVE_UP: _rejected,
    Step.FAIL: _rejected,
}


def _republish(producer: Producer, message: Message, key: str, headers: Mapping[str, Any]) -> None:
    props = {k: v for k, v in (message.properties or {}).items() if k in _COPIED_PROPERTIES}
    producer.publish(  # type: ignore[no-untyped-call]
        message.body,
        exchange="",
        routing_key=key,
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


def _requeue(message: Message) -> None:
    try:
        message.requeue()  # type: ignore[no-untyped-call]
    except Exception:
        logger.warning("requeue failed; the broker redelivers it on reconnect", exc_info=True)


def _reject(message: Message) -> None:
    try:
        message.reject(requeue=False)  # type: ignore[no-untyped-call]
    except Exception:
        logger.warning("reject failed; the redelivery will be refused again", exc_info=True)
