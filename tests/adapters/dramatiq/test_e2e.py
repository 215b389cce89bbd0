"""D1-D5: the reference app in real ``dramatiq`` worker processes, on Redis and
RabbitMQ, with PostgreSQL. Each test sends messages, waits for conditions with
deadlines, and checks the business table, the inbox and what the broker holds."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from dramatiq import Message
from dramatiq.results.backends import RedisBackend
from sqlalchemy import select
from sqlalchemy.engine import Engine

from integrations.dramatiq.model import applications, make_inbox, shipments_table, total_rows
from integrations.dramatiq.producer import send_commands, ship_message
from integrations.dramatiq.settings import Settings
from tests.adapters.dramatiq.conftest import drain, wait_until
from tests.conftest import DUPLICATED_COMMANDS, REDIS_URL

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]
CONSUMER = "shipping.ship"


def results_of(messages: list[Message[Any]], timeout_s: int = 60) -> list[Any]:
    """Block until every message has a stored result (processed and acked)."""
    backend = RedisBackend(url=REDIS_URL)
    return [backend.get_result(m, block=True, timeout=timeout_s * 1000) for m in messages]


def dead_letters(broker: Any, queue: str) -> list[Message[Any]]:
    """The messages in the queue's dead-letter queue (RabbitMQ .XQ, Redis .XQ set)."""
    if hasattr(broker, "channel"):
        found = []
        while True:
            method, _props, body = broker.channel.basic_get(f"{queue}.XQ", auto_ack=False)
            if method is None:
                break
            found.append(Message.decode(body))
        broker.channel.basic_recover(requeue=True)
        return found
    bodies = broker.client.hvals(f"{broker.namespace}:{queue}.XQ.msgs")
    return [Message.decode(body) for body in bodies]


def delayed_count(broker: Any, queue: str) -> int:
    """Messages waiting in the queue's delay queue (where retries go)."""
    if hasattr(broker, "channel"):
        return int(broker.get_queue_message_counts(queue)[1])
    return int(broker.client.llen(f"{broker.namespace}:{queue}.DQ"))


def test_d1_copies_with_new_message_ids_apply_once(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine, broker_name: str
) -> None:
    """Every command sent 2-3 times (each copy a new message ID) is applied once,
    and every copy's stored result is the first run's result."""
    count = DUPLICATED_COMMANDS
    worker = start_worker(threads=8)
    worker.wait_ready()
    orders = [f"order-{i}" for i in range(count)]
    messages = [producer.enqueue(ship_message(app_settings.queue, o, qty=7)) for o in orders]
    messages += [producer.enqueue(ship_message(app_settings.queue, o, qty=7)) for o in orders]
    messages += [producer.enqueue(ship_message(app_settings.queue, o, qty=7)) for o in orders[::2]]
    assert len({m.message_id for m in messages}) == len(messages) == count * 5 // 2

    results = results_of(messages)

    assert applications(engine, app_settings.prefix) == dict.fromkeys(orders, 1)
    assert results == [{"order_id": m.kwargs["order_id"], "shipped": 7} for m in messages]


@pytest.mark.parametrize("broker_name", ["redis", "rabbitmq"], indirect=True)
@pytest.mark.parametrize(
    ("hang", "applied_at_kill"),
    [("hang_in_body", 0), ("hang_after_commit", 1)],
    ids=["mid-transaction", "after-commit-before-ack"],
)
def test_d2_kill9_mid_batch_loses_nothing_applies_nothing_twice(
    app_settings: Settings,
    producer: Any,
    start_worker: Any,
    engine: Engine,
    hang: str,
    applied_at_kill: int,
) -> None:
    """A worker process killed with SIGKILL mid-batch, at a known point of one
    command: inside its transaction, or after its COMMIT with the ack not sent.
    After a restart every command is applied exactly once; the committed but
    unacknowledged delivery comes back and is a duplicate (its one row is the
    killed process's, and its result is the stored one)."""
    killed = "order-40"
    # Redis requeues a dead worker's messages after its heartbeat timeout,
    # shortened here so that the test is prompt.
    changes = {"redis_heartbeat_ms": 2000}
    first = start_worker(threads=1, **changes, **{hang: killed})
    first.wait_ready()
    orders = [f"order-{i}" for i in range(120)]
    messages = [producer.enqueue(ship_message(app_settings.queue, o, qty=3)) for o in orders]
    wait_until(lambda: f"hang {killed}" in first.text(), 30, "the hang")

    # When the worker process is killed there, without a chance to ack or clean up
    killed_pid = first.worker_pid()
    os.kill(killed_pid, signal.SIGKILL)
    wait_until(lambda: first.proc.poll() is not None, 20, "the dramatiq command to notice")
    at_kill = applications(engine, app_settings.prefix)
    assert at_kill.get(killed, 0) == applied_at_kill
    assert len(at_kill) < len(orders), "the kill landed mid-batch"

    # Then restarted workers finish the batch: nothing lost, nothing twice
    drain(producer, app_settings.queue, start_worker, threads=4, **changes)
    results = results_of(messages)
    assert applications(engine, app_settings.prefix) == dict.fromkeys(orders, 1)
    assert results[orders.index(killed)] == {"order_id": killed, "shipped": 3}
    table = shipments_table(app_settings.prefix)
    with engine.connect() as conn:
        writers = conn.execute(select(table.c.worker_pid).where(table.c.order_id == killed))
        [writer] = writers.scalars().all()
    assert (writer == killed_pid) is bool(applied_at_kill)


def test_d3_mismatched_redelivery_is_quarantined_and_dead_lettered(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """Same command ID, different payload: quarantined with the message's details,
    business state untouched, message in the dead-letter queue, never retried."""
    worker = start_worker(threads=2)
    worker.wait_ready()
    first = producer.enqueue(ship_message(app_settings.queue, "order-1", qty=1))
    assert results_of([first]) == [{"order_id": "order-1", "shipped": 1}]

    tampered = producer.enqueue(ship_message(app_settings.queue, "order-1", qty=99))
    wait_until(lambda: dead_letters(producer, app_settings.queue), 30, "the dead letter")

    [dead] = dead_letters(producer, app_settings.queue)
    assert dead.message_id == tampered.message_id
    assert "retries" not in dead.options  # Retries failed it at once, no retry
    assert delayed_count(producer, app_settings.queue) == 0
    inbox = make_inbox(engine, app_settings.prefix, 45)
    [record] = inbox.quarantined(CONSUMER)
    assert (record.command_id, record.reason, record.occurrences) == (
        "order-1",
        "payload_mismatch",
        1,
    )
    assert record.details["message_id"] == tampered.message_id
    assert record.details["kwargs"]["qty"] == 99
    assert record.details["actor"] == "ship"
    table = shipments_table(app_settings.prefix)
    with engine.connect() as conn:
        assert conn.execute(select(table.c.order_id, table.c.qty)).all() == [("order-1", 1)]


@pytest.mark.parametrize("broker_name", ["redis"], indirect=True)
def test_d4_two_workers_duplicate_heavy_queue_apply_each_command_once(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """Two worker processes with four threads each race over four copies of
    every command: each command is applied once."""
    workers = [start_worker(threads=4), start_worker(threads=4)]
    for worker in workers:
        worker.wait_ready()
    orders = [f"order-{i}" for i in range(120)]
    messages = [
        producer.enqueue(ship_message(app_settings.queue, order))
        for order in orders
        for _copy in range(4)  # copies back to back: they reach both workers together
    ]

    results_of(messages)

    assert applications(engine, app_settings.prefix) == dict.fromkeys(orders, 1)
    table = shipments_table(app_settings.prefix)
    with engine.connect() as conn:
        pids = set(conn.execute(select(table.c.worker_pid).distinct()).scalars())
    assert len(pids) == 2, "both worker processes should have applied commands"


def test_d5_misaligned_retention_refuses_to_boot(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """An inbox keeping evidence 1 day, under a 7-day dead-letter TTL: the
    worker exits at boot and consumes nothing."""
    send_commands(producer, app_settings.queue, ["order-1"])
    worker = start_worker(threads=1, retention_days=1)

    wait_until(lambda: worker.proc.poll() is not None, 30, "the worker to refuse to start")

    assert worker.proc.returncode != 0
    log = worker.text()
    assert "RetentionMisalignedError" in log
    assert "dead_letter_ttl" in log
    assert "Worker process is ready for action." not in log
    assert total_rows(engine, app_settings.prefix) == 0
