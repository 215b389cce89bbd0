"""The guarded aio-pika callback: one delivery decoded, guarded and settled.

:func:`guarded` builds it; the transaction is :class:`~._runner.Runner`'s and
the broker verbs are :func:`~._settle.perform`'s.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aio_pika.abc import AbstractExchange, AbstractIncomingMessage, AbstractQueue
from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard import Inbox
from inboxguard._core import faults
from inboxguard._core.guarantee import Guarantee
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters._delivery import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    Delivery,
    IdSpec,
    id_getter,
    message_key,
    sent_at_from,
)
from inboxguard.adapters._drive import drive_async
from inboxguard.adapters._evidence import Refused
from inboxguard.adapters._guarantees import register_consumer
from inboxguard.adapters._redelivery import Redelivery
from inboxguard.adapters._script import Reading, Record, Run, Step, deliver
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters.aio_pika._route import queue_name
from inboxguard.adapters.aio_pika._runner import Handler, Runner
from inboxguard.adapters.aio_pika._settle import perform
from inboxguard.adapters.aio_pika._settlement import (
    AIO_PIKA_SETTLEMENT,
    acked_on_delivery,
    check_delivery,
    check_route,
    route_of,
)
from inboxguard.errors import ConfigurationError

__all__ = ["guarded"]

logger = logging.getLogger("inboxguard.aio_pika")

Callback = Callable[[AbstractIncomingMessage], Awaitable[None]]

_STAMP = (
    "publish it through the outbox (it stamps x-inbox-sent-at), or set the message's"
    " timestamp or an x-inbox-sent-at header (ISO 8601) when publishing"
)


def guarded(  # noqa: PLR0913 - mirrors the kombu adapter's signature
    handler: Handler,
    inbox: Inbox,
    *,
    session_factory: Callable[[], AsyncSession],
    command_id: IdSpec = None,
    consumer: str,
    exchange: AbstractExchange,
    queue: str | AbstractQueue | None = None,
    exclude: Iterable[str] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    retry_delay: dt.timedelta = DEFAULT_RETRY_DELAY,
    decode: Callable[[bytes], Any] = json.loads,
    shared_consumer: bool = False,
    require_sent_at: bool = False,
    guarantee: Guarantee | None = None,
) -> Callback:
    """Return an aio-pika callback awaiting ``handler(body, message)`` once per command.

    ``body`` is ``decode(message.body)`` (JSON by default) and is the payload
    digested; the handler reaches its ``AsyncSession`` with
    :func:`inboxguard.current_session`. ``command_id`` is None (default: the
    outbox's ``x-inbox-command-id`` header), a key of the body, a callable over
    it, or :func:`from_message` (over the whole :class:`Delivery`); an explicit
    one wins over the header. Retried copies go back to the consumed queue:
    with ``exchange=channel.default_exchange`` give ``queue`` (its name or the
    aio-pika queue) and a copy is published under the queue's name (without
    it, only a delivery that came through the default exchange can be
    copied; any other is handed back to the broker as it is, logged at
    ERROR); a named ``exchange`` gets the copy under the delivery's routing
    key. Copies are published ``mandatory``: one the broker returns
    unroutable is no retry, and the original is handed back, never acked.
    ``shared_consumer=True`` lets two handlers (both setting it) use one
    consumer name on purpose. ``require_sent_at=True`` refuses a message
    with no sent time (quarantined as ``missing_sent_at``, rejected);
    otherwise the first one is logged at WARNING. ``guarantee`` declares what
    only you know of the handler's guarantee table (see
    :class:`inboxguard.Guarantee`); ``inboxguard guarantees`` derives the rest.

    Raises:
        ConfigurationError: an argument cannot keep the guarantees, or
            ``consumer`` is already another handler's on this inbox.
    """
    policy = Redelivery.checked(max_attempts, retry_delay, logger)
    queue_to = queue_name(queue)
    check_route(exchange, queue_to, f"aio-pika consumer {consumer!r}")
    name = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"
    claim_consumer(inbox, consumer, name, shared=shared_consumer, option="shared_consumer")
    exclude = tuple(exclude)
    register_consumer(
        inbox,
        "aio-pika consumer",
        name,
        consumer=consumer,
        command_id=command_id,
        exclude=exclude,
        max_attempts=max_attempts,
        retry_delay=retry_delay,
        guarantee=guarantee,
        settlement=AIO_PIKA_SETTLEMENT.shown({"retry route": route_of(exchange, queue_to)}),
    )
    run = Runner(handler, inbox, session_factory, consumer, tuple(exclude))
    get_id = id_getter(command_id)
    sent_time = SentTimeCheck(
        consumer, require=require_sent_at, stamp=_STAMP, option="require_sent_at", logger=logger
    )

    rules = policy.rules(sent_time)

    async def callback(message: AbstractIncomingMessage) -> None:
        if acked_on_delivery(message):
            await _refuse_auto_acked(run, message)
            return
        attempt = policy.receive(message.headers, consumer)
        await asyncio.sleep(attempt.wait)
        key = message_key(message.message_id, message.body)
        raw = {"body": message.body.decode(errors="replace"), "headers": message.headers}
        unread = Refused(consumer, None, key, raw, (), raw)
        try:
            body = decode(message.body)
            details = _details(body, message, attempt.number)
        except Exception as bad:
            reading = Reading(unread, _unread, _unread, attempt.last_attempt, bad)
        else:
            whole = Delivery(body, details["headers"], details["properties"])
            reading = Reading(
                Refused(consumer, None, key, body, run.exclude, details),
                command_id=lambda: get_id(whole),
                sent_at=lambda: sent_at_from(attempt.headers, message.timestamp),
                last_attempt=attempt.last_attempt,
                unread=unread,
            )

        async def perform_run(request: Run) -> None:
            await run(body, message, request.command_id, request.sent_at, request.details)

        settled = await drive_async(deliver(reading, rules), perform_run, record)
        if settled.error is not None:
            attempt.report(settled.step, settled.error, settled.name, settled.shown)
        elif settled.step is Step.ACK:
            faults.reach(faults.FaultPoint.BEFORE_ACK, settled.command_id)
        await perform(settled.step, message, attempt, exchange, queue_to)

    async def record(request: Record) -> bool:
        return await run.record(request.error, request.refused, request.reason)

    return callback


async def _refuse_auto_acked(run: Runner, message: AbstractIncomingMessage) -> None:
    """A delivery the broker already forgot (``no_ack=True``): nothing can retry
    or reject it, so it is neither run nor settled, only quarantined (logged
    at CRITICAL)."""
    key = message_key(message.message_id, message.body)
    raw = {"body": message.body.decode(errors="replace"), "headers": message.headers}
    try:
        check_delivery(message, f"aio-pika consumer {run.consumer!r}")
    except ConfigurationError as refusal:
        logger.critical("%s", refusal)
        await run.record(refusal, Refused(run.consumer, None, key, raw, (), raw), None)


def _unread() -> None:
    """Nothing to read (the script asks for nothing of an undecodable body)."""


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
