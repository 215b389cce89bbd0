"""The guarded kombu callback: one delivery read, guarded and settled.

:func:`guarded` builds it; the transaction is :class:`~._runner.Runner`'s and
the broker verbs are :func:`~._settle.perform`'s.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kombu.entity import Queue
from kombu.message import Message
from kombu.messaging import Producer

from inboxguard import InboxStore
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
from inboxguard.adapters._drive import drive
from inboxguard.adapters._evidence import Refused, record_refusal
from inboxguard.adapters._guarantees import register_consumer
from inboxguard.adapters._redelivery import Attempt, Redelivery
from inboxguard.adapters._route import queue_name
from inboxguard.adapters._script import Reading, Record, Run, Settlement, Step, deliver
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters._stores import check_pairing
from inboxguard.adapters.kombu._runner import Runner
from inboxguard.adapters.kombu._settle import Route, perform
from inboxguard.adapters.kombu._settlement import (
    KOMBU_SETTLEMENT,
    acked_on_delivery,
    check_delivery,
    route_of,
)
from inboxguard.errors import ConfigurationError

__all__ = ["GuardedCallback", "guarded"]

logger = logging.getLogger("inboxguard.kombu")

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
    queue: str | Queue | None = None,
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
    on the message's own channel) back to the consumed queue: give ``queue``
    (its name or the kombu ``Queue``) and a copy goes to the default exchange
    under the queue's name, whatever exchange the delivery came through;
    without it only a delivery that came through the default exchange is
    copied (under its routing key, the queue's name), and any other is
    handed back to the broker as it is (requeued, logged at ERROR), never
    copied to its exchange, where other queues may be bound.
    ``shared_consumer=True`` lets two handlers (both setting it) use one
    consumer name on purpose. ``require_sent_at=True`` refuses a
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
    route = (producer, queue_name(queue))
    check_pairing(inbox, session_factory, f"kombu consumer {consumer!r}")
    name = f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', handler)}"
    claim_consumer(inbox, consumer, name, shared=shared_consumer, option="shared_consumer")
    run = Runner(handler, inbox, session_factory, id_getter(command_id), consumer, tuple(exclude))
    register_consumer(
        inbox,
        "kombu consumer",
        name,
        consumer=consumer,
        command_id=command_id,
        exclude=run.exclude,
        max_attempts=max_attempts,
        retry_delay=retry_delay,
        guarantee=guarantee,
        settlement=KOMBU_SETTLEMENT.shown({"retry route": route_of(route[1])}),
    )
    sent_time = SentTimeCheck(
        consumer, require=require_sent_at, stamp=_STAMP, option="require_sent_at", logger=logger
    )

    rules = policy.rules(sent_time)

    def callback(body: Any, message: Message) -> None:
        if acked_on_delivery(message):
            _refuse_auto_acked(inbox, message, body, consumer)
            return
        attempt = policy.receive(message.headers, consumer)
        time.sleep(attempt.wait)
        details = _details(body, message, attempt.number)
        key = message_key((message.properties or {}).get("message_id"), message.body)
        delivery = Delivery(body, details["headers"], details["properties"])
        reading = Reading(
            Refused(consumer, None, key, body, run.exclude, details),
            command_id=lambda: run.command_id(delivery),
            sent_at=lambda: sent_at_from(
                attempt.headers, (message.properties or {}).get("timestamp")
            ),
            last_attempt=attempt.last_attempt,
        )

        def perform_run(request: Run) -> None:
            run(body, message, request.command_id, request.sent_at, request.details)

        settled = drive(deliver(reading, rules), perform_run, record)
        _settle(settled, message, attempt, route)

    def record(request: Record) -> bool:
        return record_refusal(inbox, request.error, request.refused, request.reason)

    def undecodable(message: Message, error: Exception) -> None:
        attempt = policy.receive(message.headers, consumer)
        key = message_key((message.properties or {}).get("message_id"), message.body)
        raw = message.body
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        details = {**_details(text, message, attempt.number), "content_type": message.content_type}
        reading = Reading(
            Refused(consumer, None, key, text, (), details),
            command_id=_unread,
            sent_at=_unread,
            last_attempt=attempt.last_attempt,
            decode_error=error,
        )
        _settle(drive(deliver(reading, rules), _nothing, record), message, attempt, route)

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


def _settle(settled: Settlement, message: Message, attempt: Attempt, route: Route) -> None:
    """Log a failed attempt's step, then perform the step by the kombu verbs."""
    if settled.error is not None:
        attempt.report(settled.step, settled.error, settled.name, settled.shown)
    elif settled.step is Step.ACK:
        faults.reach(faults.FaultPoint.BEFORE_ACK, settled.command_id)
    perform(settled.step, message, str(settled.name), attempt, route)


def _unread() -> None:
    """Nothing to read (the script asks for nothing of an undecodable body)."""


def _nothing(_: Run) -> None:
    """Nothing to run (the script runs no undecodable body)."""


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
