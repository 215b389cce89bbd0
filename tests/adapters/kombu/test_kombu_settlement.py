"""kombu settlement: an undecodable body is quarantined, never acked away (K12);
a ``no_ack`` consumer is refused on the delivery path (K13); a retry copy
goes back to the consumed queue only, never to every queue bound to the
delivery's exchange (K15, RabbitMQ).

kombu hands a body it cannot decode to the Consumer's ``on_decode_error``
instead of the callbacks; ``ConsumerMixin``'s default acks it with one ERROR
line. The guarded callback's own hook quarantines it. kombu's in-memory
transport; SQLite holds the inbox."""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import ATTEMPT_HEADER, COMMAND_ID_HEADER, SENT_AT_HEADER, guarded
from tests.conftest import AMQP_URL, require_service, unique


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


def test_k12_an_undecodable_body_is_quarantined_and_rejected(box: inboxguard.Inbox) -> None:
    """A body that is not the JSON its content type claims: the handler never
    runs, a quarantine record keeps the raw body, and the message is rejected
    (not acked as if it had been handled)."""
    ran: list[Any] = []

    def handler(body: Any, message: Message) -> None:
        ran.append(body)

    callback = guarded(handler, box, session_factory=sessionmaker(box.engine), consumer="orders")
    queue = Queue("orders-undecodable")
    settled: list[str] = []
    with Connection("memory://") as conn:
        Producer(conn).publish(
            b"{not json",
            routing_key=queue.name,
            declare=[queue],
            content_type="application/json",
            content_encoding="utf-8",
            message_id="m-1",
        )

        def observe(message: Message, error: Exception) -> None:
            callback.on_decode_error(message, error)
            settled.append(message._state)  # kombu's record of how it was settled

        with Consumer(
            conn, queues=[queue], callbacks=[callback], on_decode_error=observe, accept=["json"]
        ):
            conn.drain_events(timeout=5)
        left = queue(conn.default_channel).get()
    assert ran == []
    assert settled == ["REJECTED"]
    assert left is None
    [record] = box.quarantined("orders")
    assert record.command_id == "message:m-1"
    assert record.reason == "DecodeError"
    assert "{not json" in str(record.details)


@pytest.mark.rabbitmq
def test_k13_a_no_ack_consumer_is_quarantined_never_run(box: inboxguard.Inbox) -> None:
    """A Consumer with ``no_ack=True`` on RabbitMQ: the broker forgot the
    message on delivery, so nothing could retry or reject it. The callback
    reads that on the message and quarantines it (``configuration``) without
    running the handler."""
    require_service("rabbitmq")
    ran: list[Any] = []

    def handler(body: Any, message: Message) -> None:
        ran.append(body)

    callback = guarded(
        handler, box, session_factory=sessionmaker(box.engine), consumer="auto-acked"
    )
    queue = Queue(unique("noack"), auto_delete=True)
    with Connection(AMQP_URL) as conn:
        Producer(conn).publish(
            {"n": 1},
            routing_key=queue.name,
            declare=[queue],
            serializer="json",
            headers={COMMAND_ID_HEADER: "c-1"},
        )
        with Consumer(conn, queues=[queue], callbacks=[callback], no_ack=True, accept=["json"]):
            conn.drain_events(timeout=5)
    assert ran == []
    [record] = box.quarantined("auto-acked")
    assert record.reason == "configuration"


def _through_topic(box: inboxguard.Inbox, *, pass_queue: bool) -> tuple[list[int], list[Any]]:
    """One command published to a topic exchange under ``payment.created``,
    which two queues are bound to: ``orders`` (consumed by the guarded
    callback, whose handler raises once) and ``audit`` (another consumer
    group, not consumed here). Return the attempts the handler saw once the
    command is applied (or 30 s passed), and the ``x-inbox-attempt`` headers
    of the messages ``audit`` holds."""
    name = unique("k15")
    topic = Exchange(f"{name}.events", type="topic", auto_delete=True)
    orders = Queue(f"{name}.orders", topic, routing_key="payment.created", auto_delete=True)
    audit = Queue(f"{name}.audit", topic, routing_key="payment.created", auto_delete=True)
    attempts: list[int] = []

    def handler(body: Any, message: Message) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            raise RuntimeError("the payment service hiccupped")

    callback = guarded(
        handler,
        box,
        session_factory=sessionmaker(box.engine),
        consumer="k15-orders",
        retry_delay=dt.timedelta(0),
        **({"queue": orders} if pass_queue else {}),
    )
    with Connection(AMQP_URL) as conn:
        channel = conn.default_channel
        for queue in (orders, audit):
            queue(channel).declare()
        headers = {COMMAND_ID_HEADER: "pay-1", SENT_AT_HEADER: dt.datetime.now(dt.UTC).isoformat()}
        Producer(channel).publish(
            {"n": 1},
            exchange=topic,
            routing_key="payment.created",
            serializer="json",
            headers=headers,
        )
        deadline = time.monotonic() + 30
        with Consumer(conn, queues=[orders], callbacks=[callback], accept=["json"]):
            while box.lookup("k15-orders", "pay-1") is None and time.monotonic() < deadline:
                with contextlib.suppress(socket.timeout):
                    conn.drain_events(timeout=1)
        held = []
        while (message := audit(channel).get(no_ack=True)) is not None:
            held.append((message.headers or {}).get(ATTEMPT_HEADER))
        for queue in (orders, audit):
            queue(channel).delete()
        topic(channel).delete()
    return attempts, held


@pytest.mark.rabbitmq
@pytest.mark.parametrize("pass_queue", [True, False], ids=["queue-given", "no-queue"])
def test_k15_a_retry_copy_goes_back_to_its_own_queue_only(
    box: inboxguard.Inbox, pass_queue: bool
) -> None:
    """A handler that raises once, on a queue bound to a topic exchange that
    another queue is bound to as well: the retry goes back to the consumed
    queue only (a copy under the queue's own name on the default exchange
    with ``queue=``, the original handed back without it). The other queue
    holds the one message it was sent, never a copy with a bumped attempt."""
    require_service("rabbitmq")
    attempts, audit = _through_topic(box, pass_queue=pass_queue)
    assert attempts == [1, 2]
    assert box.lookup("k15-orders", "pay-1") is not None
    assert box.quarantined("k15-orders") == []
    assert audit == [None]
