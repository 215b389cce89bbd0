"""The aio-pika verbs of a settled delivery: ack, a retry copy then ack,
hand back (nack with requeue), reject.

Where a copy goes is ``_route``'s decision; a copy with nowhere known to
go, or one the broker returns, hands the original back instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from aio_pika import Message
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage

from inboxguard.adapters._redelivery import Attempt, Step
from inboxguard.adapters.aio_pika._route import copy_published, routing_key_of

__all__ = ["perform"]

logger = logging.getLogger("inboxguard.aio_pika")


async def perform(
    step: Step,
    message: AbstractIncomingMessage,
    attempt: Attempt,
    exchange: AbstractExchange,
    queue: str | None,
) -> None:
    """Do what ``step`` says with the message (retry: publish the copy, then
    ack; a copy with nowhere known to go, or returned, hands the original back)."""
    if step is Step.ACK:
        await _quietly(message.ack(), "ack after the commit")
    elif step in (Step.RETRY, Step.REQUEUE):
        headers = attempt.next_headers() if step is Step.RETRY else attempt.requeue_headers()
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
        elif await _republish(exchange, key, message, headers):
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
    else:
        await _quietly(message.reject(requeue=False), "reject")


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
