"""A publish RabbitMQ cannot route is a failed send, never a delivery (O13):
the row counts an attempt and keeps the broker's reason, is dead after
``max_attempts``, and is delivered once its queue exists."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from tests.conftest import AMQP_URL, FakeClock, require_service, unique


@pytest.fixture
def box(sqlite_url, prefix):
    engine = create_engine(sqlite_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix, clock=FakeClock())
    outbox.create_schema()
    yield outbox
    engine.dispose()


def add(box, command_id, destination):
    with Session(box.engine) as session, session.begin():
        box.add(session, command_id=command_id, destination=destination, payload={"n": 1})


def test_o13_a_missing_queue_is_not_a_delivery_until_the_queue_appears(box):
    require_service("rabbitmq")
    from kombu import Connection, Queue

    from inboxguard.adapters.kombu.transport import KombuTransport

    queue_name = unique("missing")
    add(box, "order.ship:id=1", queue_name)
    transport = KombuTransport(Connection(AMQP_URL))  # no declare=: nothing is bound yet
    reader = Connection(AMQP_URL)
    try:
        with inboxguard.Dispatcher(box, transport) as dispatcher:
            assert dispatcher.run_once() == 0
            row = box.get("order.ship:id=1")
            assert (row.delivered_at, row.attempts) == (None, 1)
            assert "UnroutableMessageError" in row.last_error
            assert "NO_ROUTE" in row.last_error
            assert dispatcher.stats.failed == 1

            with reader.channel() as channel:  # a consumer declares its queue
                Queue(queue_name, durable=True)(channel).declare()
            box.clock.advance(dt.timedelta(minutes=10))  # past the backoff
            assert dispatcher.run_once() == 1
        row = box.get("order.ship:id=1")
        assert row.delivered_at is not None
        assert row.attempts == 2
        with reader.SimpleQueue(queue_name) as simple:
            message = simple.get(timeout=10)
            assert message.properties["message_id"] == "order.ship:id=1"
            message.ack()
    finally:
        with reader.channel() as channel:
            Queue(queue_name)(channel).delete()
        transport.close()
        reader.release()


def test_o13_an_unroutable_row_ends_dead_with_the_reason(box):
    require_service("rabbitmq")
    from kombu import Connection

    from inboxguard.adapters.kombu.transport import KombuTransport

    add(box, "order.ship:id=2", unique("typo"))
    transport = KombuTransport(Connection(AMQP_URL))
    try:
        with inboxguard.Dispatcher(box, transport, max_attempts=2) as dispatcher:
            dispatcher.run_once()
            box.clock.advance(dt.timedelta(minutes=10))
            dispatcher.run_once()
    finally:
        transport.close()
    assert box.status().dead == 1
    (dead,) = box.dead()
    assert (dead.command_id, dead.delivered_at, dead.attempts) == ("order.ship:id=2", None, 2)
    assert "NO_ROUTE" in dead.last_error


def test_o13_kombu_refuses_an_amqp_connection_without_confirms():
    from kombu import Connection

    from inboxguard.adapters.kombu.transport import KombuTransport

    off = Connection(AMQP_URL, transport_options={"confirm_publish": False})
    with pytest.raises(inboxguard.ConfigurationError, match="confirm_publish=False"):
        KombuTransport(off)
    plain = Connection(AMQP_URL)
    KombuTransport(plain)
    assert plain.transport_options["confirm_publish"] is True
