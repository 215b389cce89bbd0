"""Transports against the real brokers: what the broker holds carries the
command ID as the message id and in the headers, plus the digest (O10)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.outbox import HEADER_COMMAND_ID, HEADER_DIGEST
from tests.conftest import AMQP_URL, REDIS_URL, require_service, unique

BROKERS = {"redis": REDIS_URL, "rabbitmq": AMQP_URL}


@pytest.fixture
def pg_outbox(pg_url, prefix):
    engine = create_engine(pg_url)
    box = inboxguard.Outbox(engine, table_prefix=prefix)
    box.create_schema()
    yield box
    box.drop_schema()
    engine.dispose()


def add_rows(box, destination, payloads):
    with Session(box.engine) as session, session.begin():
        for cid, payload in payloads.items():
            box.add(session, command_id=cid, destination=destination, payload=payload)


def pika_url(url: str) -> str:
    """pika reads the vhost ``/`` only percent-encoded."""
    return url.rstrip("/") + "/%2F" if url.endswith("//") else url


def delete_queue(queue, reader, name):
    from kombu import Queue

    queue.close()
    with reader.channel() as channel:
        Queue(name)(channel).delete()


def drain(queue, count, timeout=10.0):
    out = []
    for _ in range(count):
        message = queue.get(block=True, timeout=timeout)
        message.ack()
        out.append(message)
    return out


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_o10_kombu_publishes_under_the_command_id(broker, pg_outbox):
    require_service(broker)
    from kombu import Connection

    from inboxguard.adapters.kombu.transport import KombuTransport

    queue_name = unique("q")
    rows = {f"order.ship:id={n}": {"order": n} for n in range(3)}
    add_rows(pg_outbox, queue_name, rows)
    conn = Connection(BROKERS[broker], transport_options={"confirm_publish": True})
    transport = KombuTransport(conn)
    reader = Connection(BROKERS[broker])
    queue = reader.SimpleQueue(queue_name)
    try:
        with inboxguard.Dispatcher(pg_outbox, transport) as dispatcher:
            assert dispatcher.run_once() == 3
        got = drain(queue, 3)
        assert {m.properties["message_id"] for m in got} == set(rows)
        for message in got:
            cid = message.properties["message_id"]
            assert message.headers[HEADER_COMMAND_ID] == cid
            assert message.headers[HEADER_DIGEST] == inboxguard.digest_of(rows[cid])
            assert message.payload == rows[cid]
        assert pg_outbox.get("order.ship:id=0").receipt["message_id"] == "order.ship:id=0"
    finally:
        delete_queue(queue, reader, queue_name)
        transport.close()
        reader.release()


def test_o10_an_unreachable_broker_leaves_rows_undelivered(pg_outbox):
    from kombu import Connection

    from inboxguard.adapters.kombu.transport import KombuTransport

    add_rows(pg_outbox, "nowhere", {"c-1": {"n": 1}})
    transport = KombuTransport(
        Connection("amqp://guest:guest@127.0.0.1:1//", connect_timeout=0.5),
        retry_policy={"max_retries": 0},
    )
    with inboxguard.Dispatcher(pg_outbox, transport) as dispatcher:
        assert dispatcher.run_once() == 0
    row = pg_outbox.get("c-1")
    assert (row.delivered_at, row.attempts) == (None, 1)
    assert row.last_error
    assert pg_outbox.status().backlog == 1


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_o10_celery_sends_the_command_id_as_task_id_and_header(broker, pg_outbox):
    require_service(broker)
    from celery import Celery
    from kombu import Connection

    from inboxguard.adapters.celery.transport import CeleryTransport

    queue_name = unique("celery")
    # Not the current app: a shared task of a later test must not resolve to it.
    app = Celery("producer", broker=BROKERS[broker], set_as_current=False)
    app.conf.broker_transport_options = {"confirm_publish": True}
    payloads = {
        "invoice.charge:id=1": {"args": [1], "kwargs": {"cycle": "2026-11"}},
        "invoice.charge:id=2": {"invoice": 2},
    }
    add_rows(pg_outbox, "billing.charge", payloads)
    transport = CeleryTransport(app, queue=queue_name)
    reader = Connection(BROKERS[broker])
    queue = reader.SimpleQueue(queue_name)
    try:
        with inboxguard.Dispatcher(pg_outbox, transport) as dispatcher:
            assert dispatcher.run_once() == 2
        got = {m.headers["id"]: m for m in drain(queue, 2)}
        assert set(got) == set(payloads)
        first = got["invoice.charge:id=1"]
        assert first.headers["task"] == "billing.charge"
        assert first.headers[HEADER_COMMAND_ID] == "invoice.charge:id=1"
        assert first.headers[HEADER_DIGEST] == inboxguard.digest_of(payloads["invoice.charge:id=1"])
        args, kwargs, _embed = first.payload
        assert (args, kwargs) == ([1], {"cycle": "2026-11"})
        _args, kwargs, _embed = got["invoice.charge:id=2"].payload
        assert kwargs == {"invoice": 2}
        assert pg_outbox.get("invoice.charge:id=2").receipt["task_id"] == "invoice.charge:id=2"
    finally:
        delete_queue(queue, reader, queue_name)
        reader.release()
        app.close()


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_o10_dramatiq_enqueues_with_a_stable_message_id(broker, pg_outbox):
    require_service(broker)
    from dramatiq.brokers.rabbitmq import RabbitmqBroker
    from dramatiq.brokers.redis import RedisBroker

    from inboxguard.adapters.dramatiq.transport import DramatiqTransport

    queue_name = unique("dq")
    if broker == "redis":
        dbroker = RedisBroker(url=REDIS_URL, namespace=unique("ns"))
    else:
        dbroker = RabbitmqBroker(url=pika_url(AMQP_URL), confirm_delivery=True)
    dbroker.declare_queue(queue_name)
    add_rows(pg_outbox, "ship_order", {"order.ship:id=9": {"args": [9], "kwargs": {}}})
    transport = DramatiqTransport(dbroker, queue_name=queue_name)
    consumer = None
    try:
        with inboxguard.Dispatcher(pg_outbox, transport) as dispatcher:
            assert dispatcher.run_once() == 1
        consumer = dbroker.consume(queue_name, prefetch=1, timeout=200)
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=10)
        message = None
        while message is None and dt.datetime.now(dt.UTC) < deadline:
            message = next(consumer)
        assert message is not None
        assert message.message_id == "order.ship:id=9"
        assert message.actor_name == "ship_order"
        assert message.args == (9,)
        assert message.options["inbox_command_id"] == "order.ship:id=9"
        assert message.options["inbox_digest"] == inboxguard.digest_of({"args": [9], "kwargs": {}})
        consumer.ack(message)
        receipt = pg_outbox.get("order.ship:id=9").receipt
        assert json.dumps(receipt)  # stored as JSON
        assert receipt["message_id"] == "order.ship:id=9"
    finally:
        if consumer is not None:
            consumer.close()
        dbroker.flush(queue_name)
        if broker == "rabbitmq":
            channel = dbroker.channel
            for name in (queue_name, f"{queue_name}.DQ", f"{queue_name}.XQ"):
                channel.queue_delete(name)
        dbroker.close()
