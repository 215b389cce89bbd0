"""C27: ``CeleryTransport(app, queue=...)`` publishes to the worker's queue as
the worker declared it (with its dead-letter arguments), never re-declaring
it; a queue RabbitMQ does not have leaves the row undelivered with an error
that says what to do. PostgreSQL holds the outbox."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Exchange, Queue
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from tests.conftest import AMQP_URL, require_service, unique

pytestmark = pytest.mark.postgresql


@pytest.fixture
def outbox(pg_url: str, prefix: str) -> Iterator[inboxguard.Outbox]:
    engine = create_engine(pg_url)
    box = inboxguard.Outbox(engine, table_prefix=prefix)
    box.create_schema()
    yield box
    box.drop_schema()
    engine.dispose()


@pytest.fixture
def producer() -> Iterator[Any]:
    require_service("rabbitmq")
    from celery import Celery

    app = Celery("producer", broker=AMQP_URL, set_as_current=False)
    app.conf.broker_transport_options = {"confirm_publish": True}
    yield app
    app.close()


def _add(box: inboxguard.Outbox, command_id: str) -> None:
    with Session(box.engine) as session, session.begin():
        box.add(session, command_id=command_id, destination="orders.ship", payload={"n": 1})


def test_c27_the_producer_reaches_a_dead_lettered_queue_without_redeclaring_it(
    outbox: inboxguard.Outbox, producer: Any
) -> None:
    from inboxguard.adapters.celery.transport import CeleryTransport

    name = unique("orders")
    # The worker's declaration: its queue dead-letters to <name>.dlq.
    worker_queue = Queue(
        name,
        Exchange(name, type="direct"),
        routing_key=name,
        queue_arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{name}.dlq"},
    )
    with Connection(AMQP_URL) as conn:
        worker_queue(conn.default_channel).declare()
        try:
            _add(outbox, "ship-1")
            with inboxguard.Dispatcher(outbox, CeleryTransport(producer, queue=name)) as dispatcher:
                assert dispatcher.run_once() == 1
            row = outbox.get("ship-1")
            assert row.delivered_at is not None, row.last_error
            message = worker_queue(conn.default_channel).get(no_ack=True)
            assert message is not None
            assert message.headers["id"] == "ship-1"
        finally:
            worker_queue(conn.default_channel).delete()


def test_c27_a_queue_rabbitmq_lacks_keeps_the_row_and_says_what_to_do(
    outbox: inboxguard.Outbox, producer: Any
) -> None:
    from inboxguard.adapters.celery.transport import CeleryTransport

    name = unique("absent")
    _add(outbox, "ship-2")
    with inboxguard.Dispatcher(outbox, CeleryTransport(producer, queue=name)) as dispatcher:
        assert dispatcher.run_once() == 0
    row = outbox.get("ship-2")
    assert row.delivered_at is None
    assert f"RabbitMQ has no queue {name!r}" in (row.last_error or "")
    assert "start the worker that consumes it first" in (row.last_error or "")
    with Connection(AMQP_URL) as conn:  # and the producer did not create it
        with pytest.raises(conn.channel_errors):
            conn.default_channel.queue_declare(queue=name, passive=True)
