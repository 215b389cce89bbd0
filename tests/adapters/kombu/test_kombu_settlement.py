"""kombu settlement: an undecodable body is quarantined, never acked away (K12);
a ``no_ack`` consumer is refused on the delivery path (K13).

kombu hands a body it cannot decode to the Consumer's ``on_decode_error``
instead of the callbacks; ``ConsumerMixin``'s default acks it with one ERROR
line. The guarded callback's own hook quarantines it. kombu's in-memory
transport; SQLite holds the inbox."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import COMMAND_ID_HEADER, guarded
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
