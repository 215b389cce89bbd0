"""aio-pika consumers: a message callback that runs each command once, on asyncio.

:func:`guarded` is the asyncio twin of :func:`inboxguard.adapters.kombu.guarded`
(same headers, same outcomes), built on :meth:`inboxguard.Inbox.guard_async`:

====================================  ===============================================
guard outcome                         what happens to the message
====================================  ===============================================
fresh                                 handler awaited, result stored, COMMIT, ack
duplicate (same digest)               ack; the handler does not run
payload mismatch / beyond retention   quarantined (body, headers, properties), then
                                      ``reject(requeue=False)``
in progress / transient DB error /    a copy with ``x-inbox-attempt`` + 1 and an
handler exception                     ``x-inbox-retry-at`` time is published, then
                                      the original is acked; the copy waits (without
                                      blocking the loop) until that time; at
                                      ``max_attempts`` quarantined as
                                      ``retries_exhausted`` and rejected
====================================  ===============================================
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aio_pika import Message
from aio_pika.abc import AbstractExchange, AbstractIncomingMessage
from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard import CommandRejectedError, Inbox, QuarantineReason
from inboxguard.adapters._delivery import (
    ATTEMPT_HEADER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    RETRY_AT_HEADER,
    SENT_AT_HEADER,
    attempt_of,
    check_retry_policy,
    id_getter,
    parse_sent_at,
    retry_headers,
    seconds_until_due,
)
from inboxguard.errors import InvalidCommandError, PayloadEncodingError

__all__ = [
    "ATTEMPT_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "guarded",
]

logger = logging.getLogger("inboxguard.aio_pika")

Callback = Callable[[AbstractIncomingMessage], Awaitable[None]]
Handler = Callable[[Any, AbstractIncomingMessage], Awaitable[Any]]


def guarded(  # noqa: PLR0913 - mirrors the kombu adapter's signature
    handler: Handler,
    inbox: Inbox,
    *,
    session_factory: Callable[[], AsyncSession],
    command_id: Callable[[Any], Any] | str,
    consumer: str,
    exchange: AbstractExchange,
    exclude: Iterable[str] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    retry_delay: dt.timedelta = DEFAULT_RETRY_DELAY,
    decode: Callable[[bytes], Any] = json.loads,
) -> Callback:
    """Return an aio-pika callback awaiting ``handler(body, message)`` once per command.

    ``body`` is ``decode(message.body)`` (JSON by default) and is the payload
    digested; the handler reaches its ``AsyncSession`` with
    :func:`inboxguard.current_session`. ``command_id`` is a callable over the
    body or a key of it. Retried copies are published to ``exchange`` (for
    example ``channel.default_exchange``) with the delivery's routing key.

    Raises:
        ConfigurationError: an argument cannot keep the guarantees.
    """
    delay = check_retry_policy(max_attempts, retry_delay)
    get_id = id_getter(command_id)
    excluded = tuple(exclude)

    async def run(body: Any, message: AbstractIncomingMessage, cid: str, **kw: Any) -> None:
        async with (
            session_factory() as session,
            session.begin(),
            inbox.guard_async(
                session, consumer=consumer, command_id=cid, payload=body, exclude=excluded, **kw
            ) as entry,
        ):
            if not entry.duplicate:
                entry.result = await handler(body, message)

    async def give_up(cid: str, body: Any, error: Exception, details: dict[str, Any]) -> None:
        logger.error("giving up on %s after its last attempt failed: %r", cid, error)
        async with session_factory() as session:
            engine = (await session.connection()).engine
        await inbox.quarantine_delivery_async(
            engine,
            consumer=consumer,
            command_id=cid,
            payload=body,
            reason=QuarantineReason.RETRIES_EXHAUSTED,
            exclude=excluded,
            details={**details, "last_error": repr(error)},
        )

    async def callback(message: AbstractIncomingMessage) -> None:
        headers = dict(message.headers or {})
        attempt = attempt_of(headers)
        await asyncio.sleep(seconds_until_due(headers, delay))
        try:
            body = decode(message.body)
            details = _details(body, message, attempt)
            cid = get_id(body)
            sent_at = parse_sent_at(headers.get(SENT_AT_HEADER, message.timestamp))
        except Exception as bad:
            await _refuse_unusable(message, bad)
            return
        try:
            await run(body, message, cid, sent_at=sent_at, details=details)
        except CommandRejectedError:
            await _quietly(message.reject(requeue=False), "reject")
        except (InvalidCommandError, PayloadEncodingError) as bad:
            await _refuse_unusable(message, bad)
        except Exception as error:
            if attempt >= max_attempts:
                await give_up(cid, body, error, details)
                await _quietly(message.reject(requeue=False), "reject")
                return
            logger.warning("attempt %d/%d of %s failed (%r)", attempt, max_attempts, cid, error)
            await _republish(exchange, message, headers, attempt, delay)
            await _quietly(message.ack(), "ack after publishing the retry copy")
        else:
            await _quietly(message.ack(), "ack after the commit")

    return callback


def _details(body: Any, message: AbstractIncomingMessage, attempt: int) -> dict[str, Any]:
    props = message.info()
    props.pop("headers", None)
    return {
        "body": body,
        "headers": dict(message.headers or {}),
        "properties": {k: v for k, v in props.items() if v is not None},
        "exchange": message.exchange,
        "routing_key": message.routing_key,
        "redelivered": message.redelivered,
        "attempt": attempt,
    }


async def _republish(
    exchange: AbstractExchange,
    message: AbstractIncomingMessage,
    headers: Mapping[str, Any],
    attempt: int,
    delay: float,
) -> None:
    copy = Message(
        message.body,
        headers=retry_headers(headers, attempt, delay),
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
    await exchange.publish(copy, routing_key=message.routing_key or "")


async def _quietly(action: Awaitable[None], what: str) -> None:
    try:
        await action
    except Exception:
        logger.warning("%s failed; a redelivery will be handled by the inbox", what, exc_info=True)


async def _refuse_unusable(message: AbstractIncomingMessage, error: Exception) -> None:
    logger.error(
        "refused a message with no usable body, command ID or sent time (%r); it is logged"
        " here in full and rejected: body=%r headers=%r",
        error,
        message.body,
        message.headers,
    )
    await _quietly(message.reject(requeue=False), "reject")
