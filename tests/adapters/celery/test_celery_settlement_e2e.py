"""End-to-end: no Celery setting or fault loses a command (C18-C21).

Real ``celery worker`` processes on Redis and RabbitMQ and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from integrations.celery.producer import commands
from tests.adapters.celery.conftest import Reference, wait_until
from tests.conftest import AMQP_URL
from tests.outbox._proxy import TcpProxy

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

FAULTY = "tests.adapters.celery.faulty_app"


@pytest.mark.parametrize("broker", ["redis"])
def test_c18_prefork_children_never_share_the_parents_pooled_connection(
    reference: Any, broker: str
) -> None:
    """A module-level engine with the default pool and no ``worker_process_init``
    recipe under ``celery worker -c 2``: the start-up check connected in the
    parent, yet each child works on its own connection, and every command is
    applied exactly once."""
    ref: Reference = reference(broker)
    worker = ref.worker(concurrency=2, app=FAULTY, env={"IG_FAULT": "no_recipe"})
    items = commands(40, prefix="fork")
    ref.publish(items)
    wait_until(
        lambda: ref.check().transfers == len(items),
        90,
        f"every command applied; log:\n{worker.log()[-3000:]}",
    )
    result = ref.check()
    assert (result.rows, result.applied_twice, result.balances_match) == (40, 0, True)
    assert ref.inbox().quarantined() == []
    assert "command status" not in worker.log()


def _exits(worker: Any) -> tuple[int, str]:
    worker.start(wait_ready=False)
    assert worker.proc is not None
    return worker.proc.wait(60), worker.log()


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("retry_lost", "retry_on_worker_lost=True"),
        ("ack_lost", "inbox_accept_ack_on_worker_lost=True"),
        ("early_ack", "inbox_accept_early_ack=True"),
    ],
)
def test_c19_c20_a_setting_that_can_lose_a_command_refuses_to_start_the_worker(
    reference: Any, fault: str, expected: str
) -> None:
    """``retry_on_worker_lost=True`` (Celery drops a killed child's message
    once its retries are spent), ``reject_on_worker_lost=False`` and
    ``acks_late=False`` without their opt-in: the task is refused where it is
    declared, the worker exits before consuming, and the queued command is
    still in the broker."""
    ref: Reference = reference("redis")
    ref.publish([("lost-1", "acct-1", 5)])
    code, log = _exits(ref.worker(start=False, app=FAULTY, env={"IG_FAULT": fault}))
    assert code != 0
    assert expected in log
    assert ref.check().rows == 0
    assert ref.ready_messages() == 1


def test_c20_an_accepted_loss_starts_the_worker(reference: Any) -> None:
    """``reject_on_worker_lost=False`` with ``inbox_accept_ack_on_worker_lost=True``:
    the loss is the user's explicit choice, and the worker consumes."""
    ref: Reference = reference("redis")
    ref.worker(concurrency=1, app=FAULTY, env={"IG_FAULT": "accepted_lost"})
    ref.publish([("kept-1", "acct-1", 5)])
    wait_until(lambda: ref.applied("kept-1") == 1, 30, "the command applied")


@pytest.fixture
def amqp_proxy() -> Iterator[tuple[TcpProxy, str]]:
    """A TCP proxy in front of RabbitMQ, and the broker URL that goes through it."""
    parts = urlsplit(AMQP_URL)
    proxy = TcpProxy(parts.port or 5672)
    proxy.start()
    netloc = f"{parts.username}:{parts.password}@127.0.0.1:{proxy.port}"
    yield proxy, parts._replace(netloc=netloc).geturl()
    proxy.cut()


def test_c21_a_broker_connection_cut_mid_run_loses_nothing_and_applies_nothing_twice(
    reference: Any, amqp_proxy: tuple[TcpProxy, str]
) -> None:
    """The worker's RabbitMQ connection is cut (through a TCP proxy) while
    commands are in flight: the unacked deliveries go back to the queue, acks
    of committed ones are lost with the connection, and once the worker is
    connected again every command is applied exactly once."""
    proxy, proxied = amqp_proxy
    ref: Reference = reference("rabbitmq")
    worker = ref.worker(concurrency=2, broker_url=proxied, task_delay=0.05)
    items = commands(30, prefix="cut")
    ref.publish(items)
    wait_until(lambda: ref.check().transfers >= 5, 60, "some commands applied")
    proxy.cut()
    wait_until(lambda: "Connection to broker lost" in worker.log(), 30, "the cut seen")
    proxy.start()
    wait_until(
        lambda: ref.check().transfers == len(items),
        120,
        f"every command applied; log:\n{worker.log()[-3000:]}",
    )
    result = ref.check()
    assert (result.rows, result.applied_twice, result.balances_match) == (30, 0, True)
    assert ref.inbox().quarantined() == []
    wait_until(lambda: ref.ready_messages() == 0, 60, "the queue drained")
