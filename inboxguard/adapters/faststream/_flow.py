"""One FastStream message through the guard: decode, claim, run, settle.

:class:`Delivery` is what :class:`InboxMiddleware` does per message. It reads
the attempt (the broker's own count on JetStream, the ``x-inbox-attempt``
header elsewhere), takes the command ID and sent time, runs the handler in
the claim's transaction, and turns the shared outcome policy's verdict into
the broker's verbs (``_brokers``). A message it has settled leaves through
``SkipMessage``, so FastStream neither settles it again nor replies.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from faststream.exceptions import HandlerException, SkipMessage

from inboxguard._core import headers as _headers
from inboxguard.adapters._delivery import Delivery as _Message
from inboxguard.adapters._delivery import message_key
from inboxguard.adapters._drive import drive_async
from inboxguard.adapters._evidence import Refused
from inboxguard.adapters._outcome import log_duplicate
from inboxguard.adapters._redelivery import Attempt
from inboxguard.adapters._script import Reading, Record, Run, Step, deliver
from inboxguard.adapters._stores import transaction
from inboxguard.adapters._transaction import transaction_async
from inboxguard.adapters.faststream._brokers import BrokerKind, Copy, sent_time_of
from inboxguard.adapters.faststream._guard import Guard
from inboxguard.adapters.faststream._options import HandlerOptions

__all__ = ["VERBS", "Delivery"]

logger = logging.getLogger("inboxguard.faststream")


class Delivery:
    """One message through the guard, from decoding to its settlement."""

    def __init__(
        self,
        guard: Guard,
        kind: BrokerKind,
        msg: Any,
        options: HandlerOptions,
        context: Any,
        subscriber: Any,
    ) -> None:
        self.guard = guard
        self.kind = kind
        self.msg = msg
        self.options = options
        self.context = context
        self.subscriber = subscriber
        self.headers: dict[str, Any] = dict(msg.headers or {})
        counted = kind.attempt(msg)
        seen = self.headers if counted is None else {**self.headers, _headers.ATTEMPT: counted}
        self.attempt: Attempt = guard.policy.receive(seen, options.consumer)
        self.body: Any = msg.body
        self.sent_at: dt.datetime | None = None

    async def run(self, call_next: Any) -> Any:
        guard, msg, attempt, consumer = self.guard, self.msg, self.attempt, self.options.consumer
        if not self.kind.native_retry:
            await asyncio.sleep(attempt.wait)
        key = message_key(msg.message_id, _raw_bytes(msg.body))
        raw = {"body": _text(msg.body), "headers": self.headers}
        unread = Refused(consumer, None, key, raw, (), raw)
        try:
            refusal = guard.refusal_of(self.subscriber)
            if refusal is not None:
                raise refusal
            self.body = body = await msg.decode()
            details = self.details(body)
        except Exception as bad:
            reading = Reading(unread, _unread, _unread, attempt.last_attempt, bad)
        else:
            whole = _Message(body, self.headers, details["properties"])
            reading = Reading(
                Refused(consumer, None, key, body, self.options.exclude, details),
                command_id=lambda: self.options.get_id(whole),
                sent_at=lambda: sent_time_of(msg, self.headers),
                last_attempt=attempt.last_attempt,
                unread=unread,
            )
        result: list[Any] = []

        async def perform_run(request: Run) -> None:
            self.sent_at = request.sent_at
            result.append(await self.apply(call_next, request.command_id, body, request.details))

        rules = guard.policy.rules(guard.sent_check(consumer))
        settled = await drive_async(deliver(reading, rules), perform_run, self.record, _OWN_VERBS)
        if settled.error is not None:
            attempt.report(settled.step, settled.error, settled.name, settled.shown)
        await self.perform(settled.step)
        if settled.error is not None:
            raise SkipMessage from settled.error
        return result[0]

    async def record(self, request: Record) -> bool:
        """Whether a quarantine record now holds the delivery."""
        return await self.guard.record(request.error, request.refused, request.reason)

    async def apply(self, call_next: Any, cid: str, body: Any, details: Mapping[str, Any]) -> Any:
        """The transaction: claim, run the handler, store its result, commit."""
        guard, options = self.guard, self.options
        arguments = {
            "consumer": options.consumer,
            "command_id": cid,
            "payload": body,
            "exclude": options.exclude,
            "sent_at": self.sent_at,
            "details": details,
        }
        if guard.async_session_factory is not None:
            async with (
                guard.async_session_factory() as session,
                transaction_async(session, guard.inbox, options.consumer, cid),
                guard.inbox.guard_async(session, **arguments) as entry,
            ):
                if entry.duplicate:
                    log_duplicate(logger, options.consumer, cid, "the message")
                else:
                    entry.result = await call_next(self.msg)
            return entry.result
        assert guard.session_factory is not None  # one of the two, checked at construction
        with (
            transaction(guard.inbox, guard.session_factory, options.consumer, cid) as sync_session,
            guard.inbox.guard(sync_session, **arguments) as entry,
        ):
            if entry.duplicate:
                log_duplicate(logger, options.consumer, cid, "the message")
            else:
                entry.result = await call_next(self.msg)
        return entry.result

    def details(self, body: Any) -> dict[str, Any]:
        """What a quarantine record keeps of the message."""
        msg = self.msg
        properties = {
            "message_id": msg.message_id,
            "correlation_id": msg.correlation_id,
            "content_type": msg.content_type,
        }
        return {
            "body": body,
            "headers": self.headers,
            "properties": {k: v for k, v in properties.items() if v is not None},
            "broker": self.kind.name,
            "attempt": self.attempt.number,
        }

    async def perform(self, step: Step) -> None:
        """Do what ``step`` says with the message, by :data:`VERBS`."""
        await VERBS[step](self, step)


async def _acked(delivery: Delivery, step: Step) -> None:
    await _quietly(delivery.kind.ack(delivery.msg), "ack after the commit")


async def _copied(delivery: Delivery, step: Step) -> None:
    """The broker's retry (a copy with the next attempt, or this one again;
    JetStream: a delayed nack); an unpublished copy releases the original."""
    kind, msg = delivery.kind, delivery.msg
    headers = delivery.attempt.copy_headers(step)
    if delivery.sent_at is not None and _headers.sent_at_of(headers) is None:
        headers[_headers.SENT_AT] = delivery.sent_at.isoformat()
    broker = delivery.context.get_local("broker")
    copy = Copy(delivery.body, headers, broker, delivery.subscriber)
    try:
        await kind.retry(msg, copy, delivery.guard.policy.delay)
    except Exception:
        # The copy could not be published (the broker connection is
        # gone): the original must not be acknowledged, nor rejected.
        logger.exception("could not retry a delivery; it goes back to the broker")
        await _quietly(kind.release(msg), "release")


async def _rejected(delivery: Delivery, step: Step) -> None:
    await _quietly(delivery.kind.reject(delivery.msg), "reject")


#: The FastStream verbs of each step, through the broker's kind (``_brokers``):
#: ack; the broker's retry, or release when it cannot be published; reject
#: (also a failure, a step these consumers never reach: they have no failure
#: path of their own).
VERBS: Final[Mapping[Step, Callable[[Delivery, Step], Awaitable[None]]]] = {
    Step.ACK: _acked,
    Step.RETRY: _copied,
    Step.REQUEUE: _copied,
    Step.REJECT: _rejected,
    Step.GIVE_UP: _rejected,
    Step.FAIL: _rejected,
}


#: The handler's own FastStream verbs (``AckMessage``, ``RejectMessage``...):
#: they leave as they came, the message settled by FastStream.
_OWN_VERBS = (HandlerException,)


def _unread() -> None:
    """Nothing to read (the script asks for nothing of an undecodable body)."""


def _raw_bytes(body: Any) -> bytes | str:
    return body if isinstance(body, bytes | str) else repr(body)


def _text(body: Any) -> str:
    return body.decode(errors="replace") if isinstance(body, bytes) else str(body)


async def _quietly(action: Any, what: str) -> None:
    try:
        await action
    except Exception:
        logger.warning("%s failed; a redelivery will be handled by the inbox", what, exc_info=True)
