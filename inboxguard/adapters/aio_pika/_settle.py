"""The aio-pika verbs of a settled delivery: ack, a retry copy then ack,
hand back (nack with requeue), reject.

Where a copy goes is ``_route``'s decision; a copy with nowhere known to
go, or one the broker returns, hands the original back instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aio_pika import Message
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage

from inboxguard.adapters._redelivery import Attempt, Step
from inboxguard.adapters.aio_pika._route import copy_published, routing_key_of

__all__ = ["VERBS", "perform"]

logger = logging.getLogger("inboxguard.aio_pika")


Verb = Callable[
    [Step, AbstractIncomingMessage, Attempt, AbstractExchange, str | None], Awaitable[None]
]


async def perform(
    step: Step,
    message: AbstractIncomingMessage,
    attempt: Attempt,
    exchange: AbstractExchange,
    queue: str | None,
) -> None:
    """Do what ``step`` says with the message, by :data:`VERBS`."""
    await VERBS[step](step, message, attempt, exchange, queue)


async def _acked(
    step: Step,
    message: AbstractIncomingMessage,
    attempt: Attempt,
    exchange: AbstractExchange,
    queue: str | None,
) -> None:
    await _quietly(message.ack(), "ack after the commit")


async def _copied(
    step: Step,
    message: AbstractIncomingMessage,
    attempt: Attempt,
    exchange: AbstractExchange,
    queue: str | None,
) -> None:
    """Publish the copy, then ack; a copy with nowhere known to go, or one
    returned, hands the original back."""
    key = routing_key_of(exchange, queue, message)
    if key is None:
        logger.error(
            "message %s came through exchange %r: a copy on the default exchange under"
            " its routing key %r reaches no queue; it goes back to the broker as it is."
            " Pass guarded(..., queue=<the consumed queue>) so retries go back to it",
            message.message_id,
            message.exchange,
            message.routing_key,
        )
        await _quietly(message.nack(requeue=True), "hand back")
    elif await _republish(exchange, key, message, attempt.copy_headers(step)):
        await _quietly(message.ack(), "ack after publishing its copy")
    else:
        logger.error(
            "the retry copy of message %s was returned unroutable by exchange %r under"
            " %r; the original goes back to the broker instead",
            message.message_id,
            exchange.name,
            key,
        )
        await _quietly(message.nack(requeue=True), "hand back")


async def _rejected(
    step: Step,
    message: AbstractIncomingMessage,
    attempt: Attempt,
    exchange: AbstractExchange,
    queue: str | None,
) -> None:
    await _quietly(message.reject(requeue=False), "reject")


#: The aio-pika verbs of each step: ack; a copy (the next attempt, or this
#: one again) on the route ``_route`` picks, then ack, or hand back (nack
#: with requeue) when it cannot go; reject without requeue (also a failure,
#: a step these consumers never reach: they have no failure path of their own).
VERBS: Final[Mapping[Step, Verb]] = {
    Step.ACK: _acked,
    Step.RETRY: _copied,
    Step.REQUEUE: _copied,
    Step.REJECT: _rejected,
    Step.GIVE_UP: _rejected,
    Step.FAIL: _rejected,
}


async def _republish(
    exchange: AbstractExchange,
    key: str,
    message: AbstractIncomingMessage,
    headers: dict[str, Any],
) -> bool:
    copy = Message(
        message.body,
        headers=headers,
        content_type=message.content_type,
        content_encoding=message.content_encoding,
        delivery_mode=message.delivery_mode,
        message_id=message.message_id,
        correlation_id=message.correlation_id,
        reply_to=message.reply_to,
        timestamp=message.timestamp,
        type=message.type,
        app_id=message.app_id,
        priority=message.priority,
    )
    return copy_published(await exchange.publish(copy, routing_key=key, mandatory=True))


async def _quietly(action: Awaitable[None], what: str) -> None:
    try:
        await action
    except Exception:
        logger.warning("%s failed; a redelivery will be handled by the inbox", what, exc_info=True)
