"""kombu consumers: a ``(body, message)`` callback that runs each command once.

:func:`guarded` wraps a handler so that, per delivery:

====================================  ===============================================
guard outcome                         what happens to the message
====================================  ===============================================
fresh                                 handler runs, result stored, COMMIT, then ack
duplicate (same digest)               ack; the handler does not run
payload mismatch / beyond retention   quarantined (body, headers, properties), then
                                      ``reject(requeue=False)``
in progress / transient DB error /    a copy carrying ``x-inbox-attempt`` + 1 and a
handler exception                     ``x-inbox-retry-at`` time is published, then
                                      the original is acked; the copy waits until
                                      that time; at ``max_attempts`` quarantined
                                      (``retries_exhausted``) and rejected
no usable command ID or sent time     quarantined under the message ID, rejected
undecodable body (``on_decode_error``  quarantined with the raw body under the
of the Consumer set to the callback's  message ID, rejected (kombu's own default
``on_decode_error``)                   acks it away)
no sent time, ``require_sent_at``     quarantined (``missing_sent_at``), rejected
inboxguard error declaring a failure  quarantined under its code, rejected (never
(``ReconciliationRequiredError``)     retried: retrying cannot fix it)
quarantine record not written         a copy of the same attempt, due after
(database down, pool exhausted)       ``retry_delay``, is published, then the
                                      original is acked; the consumer keeps going
====================================  ===============================================

The command ID is, by default, the ``x-inbox-command-id`` header the outbox's
dispatcher stamps; ``command_id=`` takes it from the body (a key, a callable)
or from the whole message (:func:`from_message`) instead, and then wins over
the header. A message with no sent time (``x-inbox-sent-at`` header or AMQP
``timestamp``) skips the stale-replay check: logged once per consumer, or
refused with ``require_sent_at=True``.

An ack that fails after the commit is logged and harmless: the redelivery is a
duplicate. Callbacks run on the consumer thread; keep transactions (and
``retry_delay``) well below the broker heartbeat interval.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

from kombu.message import Message
from kombu.messaging import Producer
from sqlalchemy.orm import Session

from inboxguard import InboxStore, QuarantineReason
from inboxguard._core import faults
from inboxguard._core.guarantee import Guarantee
from inboxguard.adapters._consumers import claim_consumer
from inboxguard.adapters._delivery import (
    ATTEMPT_HEADER,
    COMMAND_ID_HEADER,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_RETRY_DELAY,
    RETRY_AT_HEADER,
    SENT_AT_HEADER,
    Delivery,
    IdSpec,
    from_message,
    id_getter,
    message_key,
    sent_at_from,
)
from inboxguard.adapters._evidence import Refused, command_id_of, record_refusal
from inboxguard.adapters._guarantees import register_consumer
from inboxguard.adapters._outcome import Outcome, log_duplicate
from inboxguard.adapters._redelivery import Attempt, Redelivery, Step
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters._stores import check_pairing, transaction
from inboxguard.adapters.kombu._settlement import (
    KOMBU_SETTLEMENT,
    acked_on_delivery,
    check_delivery,
)
from inboxguard.errors import ConfigurationError

__all__ = [
    "ATTEMPT_HEADER",
    "COMMAND_ID_HEADER",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETRY_DELAY",
    "RETRY_AT_HEADER",
    "SENT_AT_HEADER",
    "Delivery",
    "GuardedCallback",
    "from_message",
    "guarded",
]

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

Callback = Callable[[Any, Message], None]

_STAMP = (
    "publish it through the outbox (it stamps x-inbox-sent-at), or set the AMQP"
    " timestamp property or an x-inbox-sent-at header (ISO 8601) when publishing"
)


class GuardedCallback:
    """A guarded kombu ``(body, message)`` callback.

    Pass :meth:`on_decode_error` to the ``Consumer`` too
    (``Consumer(..., callbacks=[cb], on_decode_error=cb.on_decode_error)``):
    kombu hands an undecodable body to that hook instead of the callback, and
    its default (``ConsumerMixin.on_decode_error``) acks the message away.
    """

    __slots__ = ("_deliver", "_undecodable")

    def __init__(
        self,
        deliver: Callable[[Any, Message], None],
        undecodable: Callable[[Message, Exception], None],
    ) -> None:
        self._deliver = deliver
        self._undecodable = undecodable

    def __call__(self, body: Any, message: Message) -> None:
        """Run the handler once per command (see :func:`guarded`)."""
        self._deliver(body, message)

    def on_decode_error(self, message: Message, error: Exception) -> None:
        """kombu's ``on_decode_error`` hook: quarantine the undecodable
        message with its raw body, then reject it (dead-lettered where the
        queue has a dead-letter exchange); when no record can be written, a
        copy goes back to the queue instead, as for any unrecorded refusal."""
        self._undecodable(message, error)


def guarded(  # noqa: PLR0913 - keyword-only settings of a guarded consumer
    handler: Callable[[Any, Message], Any],
    inbox: InboxStore,
    *,
    session_factory: Callable[[], Any],
    command_id: IdSpec = None,
    consumer: str,
    exclude: Iterable[str] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    retry_delay: dt.timedelta = DEFAULT_RETRY_DELAY,
    producer: Producer | Callable[[], Producer] | None = None,
    shared_consumer: bool = False,
    require_sent_at: bool = False,
    guarantee: Guarantee | None = None,
) -> GuardedCallback:
    """Return a kombu callback running ``handler(body, message)`` once per command.

    The handler reaches its session with :func:`inboxguard.current_session`;
    its return value (JSON or None) is stored as the command's result.
    ``command_id`` is None (default: the outbox's ``x-inbox-command-id``
    header; a message without it is refused), a key of the decoded body, a
    callable over it, or :func:`from_message` (a callable over the whole
    :class:`Delivery`); an explicit one wins over the header. The payload
    digested is the decoded body. Retried copies are published with
    ``producer`` (a Producer or a zero-argument callable returning one, such
    as ``lambda: self.producer`` in a ``ConsumerProducerMixin``; default: one
    on the message's own channel) to the exchange and routing key the message
    came through. ``shared_consumer=True`` lets two handlers (both setting it)
    use one consumer name on purpose. ``require_sent_at=True`` refuses a
    message with no sent time (quarantined as ``missing_sent_at``, rejected);
    otherwise the first one is logged at WARNING. ``guarantee`` declares what
    only you know of the handler's guarantee table (see
    :class:`inboxguard.Guarantee`); ``inboxguard guarantees`` derives the rest.
    Give the ``Consumer`` the callback's ``on_decode_error`` as well, so an
    undecodable body is quarantined rather than acked by kombu.

    Raises:
        ConfigurationError: an argument cannot keep the guarantees, or
            ``consumer`` is already another handler's on this inbox.
    """
    policy = Redelivery.checked(max_attempts, retry_delay, logger)
    check_pairing(inbox, session_factory, f"kombu consumer {consumer!r}")
    name = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"
    claim_consumer(inbox, consumer, name, shared=shared_consumer, option="shared_consumer")
    exclude = tuple(exclude)
    register_consumer(
        inbox,
        "kombu consumer",
        name,
        consumer=consumer,
        command_id=command_id,
        exclude=exclude,
        max_attempts=max_attempts,
        retry_delay=retry_delay,
        guarantee=guarantee,
        settlement=KOMBU_SETTLEMENT.shown({}),
    )
    run = _Runner(handler, inbox, session_factory, id_getter(command_id), consumer, tuple(exclude))
    sent_time = SentTimeCheck(
        consumer, require=require_sent_at, stamp=_STAMP, option="require_sent_at", logger=logger
    )

    def callback(body: Any, message: Message) -> None:
        if acked_on_delivery(message):
            _refuse_auto_acked(inbox, message, body, consumer)
            return
        attempt = policy.receive(message.headers)
        time.sleep(attempt.wait)
        details = _details(body, message, attempt.number)
        key = message_key((message.properties or {}).get("message_id"), message.body)
        refused = Refused(consumer, None, key, body, run.exclude, details)
        try:
            delivery = Delivery(body, details["headers"], details["properties"])
            cid = command_id_of(run.command_id, delivery)
            sent_at = sent_at_from(attempt.headers, (message.properties or {}).get("timestamp"))
            refused = replace(refused, command_id=cid)
            sent_at = sent_time(sent_at)
        except Exception as bad:
            written = record_refusal(inbox, bad, refused)
            outcome = attempt.unusable().recorded(written)
            _perform(attempt.settle(outcome, bad, key, details), message, key, attempt, producer)
            return
        try:
            run(body, message, cid, sent_at, details)
        except Exception as error:
            outcome = attempt.judge(error)
            if outcome.needs_record:
                written = record_refusal(
                    inbox, error, replace(refused, command_id=cid), _reason(outcome)
                )
                outcome = outcome.recorded(written)
            step = attempt.settle(outcome, error, cid, details)
        else:
            faults.reach(faults.FaultPoint.BEFORE_ACK, cid)
            step = Step.ACK
        _perform(step, message, cid, attempt, producer)

    def undecodable(message: Message, error: Exception) -> None:
        attempt = policy.receive(message.headers)
        key = message_key((message.properties or {}).get("message_id"), message.body)
        raw = message.body
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        details = {**_details(text, message, attempt.number), "content_type": message.content_type}
        refused = Refused(consumer, None, key, text, (), details)
        written = record_refusal(inbox, error, refused)
        outcome = attempt.unusable().recorded(written)
        _perform(attempt.settle(outcome, error, key, details), message, key, attempt, producer)

    return GuardedCallback(callback, undecodable)


def _refuse_auto_acked(inbox: InboxStore, message: Message, body: Any, consumer: str) -> None:
    """A ``no_ack=True`` delivery: the broker already forgot it, so it is
    neither run nor settled, only quarantined (logged at CRITICAL)."""
    key = message_key((message.properties or {}).get("message_id"), message.body)
    try:
        check_delivery(message, f"kombu consumer {consumer!r}")
    except ConfigurationError as refusal:
        logger.critical("%s", refusal)
        record_refusal(
            inbox, refusal, Refused(consumer, None, key, body, (), _details(body, message, 1))
        )


def _reason(outcome: Outcome) -> str | None:
    return QuarantineReason.RETRIES_EXHAUSTED if outcome.exhausted else None


class _Runner:
    """One delivery's transaction: guard, handler, commit."""

    def __init__(
        self,
        handler: Callable[[Any, Message], Any],
        inbox: InboxStore,
        session_factory: Callable[[], Session],
        command_id: Callable[[Delivery], Any],
        consumer: str,
        exclude: tuple[str, ...],
    ) -> None:
        self.handler = handler
        self.inbox = inbox
        self.session_factory = session_factory
        self.command_id = command_id
        self.consumer = consumer
        self.exclude = exclude

    def __call__(
        self,
        body: Any,
        message: Message,
        cid: str,
        sent_at: dt.datetime | None,
        details: Mapping[str, Any],
    ) -> None:
        with (
            transaction(self.inbox, self.session_factory, self.consumer, cid) as session,
            self.inbox.guard(
                session,
                consumer=self.consumer,
                command_id=cid,
                payload=body,
                exclude=self.exclude,
                sent_at=sent_at,
                details=details,
            ) as entry,
        ):
            if entry.duplicate:
                log_duplicate(logger, self.consumer, cid, "the message")
            else:
                entry.result = self.handler(body, message)


def _details(body: Any, message: Message, attempt: int) -> dict[str, Any]:
    info = message.delivery_info or {}
    return {
        "body": body,
        "headers": dict(message.headers or {}),
        "properties": {k: v for k, v in (message.properties or {}).items() if k != "delivery_info"},
        "exchange": info.get("exchange"),
        "routing_key": info.get("routing_key"),
        "redelivered": info.get("redelivered"),
        "attempt": attempt,
    }


def _perform(
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
