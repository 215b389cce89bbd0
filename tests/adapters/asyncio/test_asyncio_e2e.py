"""The aio-pika reference consumer, a real asyncio process on RabbitMQ, with
PostgreSQL through asyncpg.

The consumer handles up to ten deliveries concurrently, so copies of one
command race each other on separate connections. A "barrier" command is
published last; the tests wait for it and for every delivery to be logged.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

from inboxguard import QuarantineReason
from inboxguard.adapters.aio_pika import SENT_AT_HEADER
from tests.adapters.generic_support import hold_claim_while, paid, payments, wait_until
from tests.conftest import DUPLICATED_COMMANDS

from .conftest import AsyncioSetup

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

COMMANDS = 150
#: The command at which the kill tests stop the consumer.
KILLED_AT = 40


def barrier(setup: AsyncioSetup, name: str = "barrier") -> None:
    setup.send({"command_id": name, "amount": 0})
    wait_until(
        lambda: paid(setup.engine, setup.config.prefix, name), 180, f"{name} applied"
    )  # after up to ~2,500 deliveries
    wait_until(setup.deliveries.settled, 60, "every delivery settled")


def test_duplicated_publishing_applies_each_command_exactly_once(
    asyncio_setup: AsyncioSetup,
) -> None:
    rng = random.Random(6)
    bodies = [
        {"command_id": f"pay-{i}", "amount": i}
        for i in range(DUPLICATED_COMMANDS)
        for _ in range(rng.choice((2, 3)))
    ]
    rng.shuffle(bodies)
    with asyncio_setup.worker():
        asyncio_setup.send(*bodies)
        barrier(asyncio_setup)
    assert len(asyncio_setup.deliveries.all()) == len(bodies) + 1
    assert payments(asyncio_setup.engine, asyncio_setup.config.prefix) == (
        DUPLICATED_COMMANDS + 1,
        DUPLICATED_COMMANDS + 1,
    )
    assert asyncio_setup.queue_depth() == 0


@pytest.mark.parametrize(
    ("hang", "applied_at_kill"),
    [("INBOXGUARD_HANG_IN_BODY", []), ("INBOXGUARD_HANG_BEFORE_ACK", [KILLED_AT])],
    ids=["mid-transaction", "after-commit-before-ack"],
)
def test_kill_9_mid_stream_loses_nothing_and_applies_nothing_twice(
    asyncio_setup: AsyncioSetup, hang: str, applied_at_kill: list[int]
) -> None:
    """The consumer is killed where it stops (inside the transaction, or after
    the COMMIT with the ack not sent), not at a random instant. The killed
    delivery comes back from RabbitMQ; after a commit it is a duplicate and
    is not applied again."""
    prefix = asyncio_setup.config.prefix
    asyncio_setup.send(*({"command_id": f"pay-{i}", "amount": i} for i in range(COMMANDS)))
    with asyncio_setup.worker(**{hang: f"pay-{KILLED_AT}"}) as worker:
        wait_until(lambda: f"hang pay-{KILLED_AT}" in worker.log.read_text(), 30, "the hang")
        worker.kill9()
    assert paid(asyncio_setup.engine, prefix, f"pay-{KILLED_AT}") == applied_at_kill
    assert payments(asyncio_setup.engine, prefix)[0] < COMMANDS, "the kill landed mid-stream"
    asyncio_setup.deliveries.forget()
    with asyncio_setup.worker():
        wait_until(
            lambda: payments(asyncio_setup.engine, prefix)[1] == COMMANDS, 60, "every payment"
        )
        barrier(asyncio_setup)
    assert asyncio_setup.deliveries.of(f"pay-{KILLED_AT}") == 1, "the killed delivery came back"
    assert paid(asyncio_setup.engine, prefix, f"pay-{KILLED_AT}") == [KILLED_AT]
    assert payments(asyncio_setup.engine, prefix) == (COMMANDS + 1, COMMANDS + 1)
    assert asyncio_setup.queue_depth() == 0


def test_mismatch_is_quarantined_with_the_message_and_not_redelivered(
    asyncio_setup: AsyncioSetup,
) -> None:
    prefix = asyncio_setup.config.prefix
    with asyncio_setup.worker():
        asyncio_setup.send({"command_id": "m1", "amount": 5})
        wait_until(lambda: paid(asyncio_setup.engine, prefix, "m1"), 30, "m1 applied")
        asyncio_setup.send({"command_id": "m1", "amount": 7}, headers={"trace": "t-1"})
        wait_until(lambda: asyncio_setup.inbox.quarantined("payments"), 30, "a quarantine record")
        barrier(asyncio_setup)
    [record] = asyncio_setup.inbox.quarantined("payments")
    assert record.reason == QuarantineReason.PAYLOAD_MISMATCH
    assert record.details is not None
    assert record.details["body"] == {"command_id": "m1", "amount": 7}
    assert record.details["headers"]["trace"] == "t-1"
    assert "timestamp" in record.details["properties"]
    assert paid(asyncio_setup.engine, prefix, "m1") == [5]
    assert asyncio_setup.deliveries.of("m1") == 2
    assert asyncio_setup.queue_depth() == 0


def test_message_older_than_the_horizon_is_quarantined_not_applied(
    asyncio_setup: AsyncioSetup,
) -> None:
    sent = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).isoformat()
    with asyncio_setup.worker():
        asyncio_setup.send({"command_id": "old", "amount": 1}, headers={SENT_AT_HEADER: sent})
        wait_until(lambda: asyncio_setup.inbox.quarantined("payments"), 30, "a quarantine record")
        barrier(asyncio_setup)
    [record] = asyncio_setup.inbox.quarantined("payments")
    assert record.reason == QuarantineReason.BEYOND_RETENTION
    assert paid(asyncio_setup.engine, asyncio_setup.config.prefix, "old") == []
    assert asyncio_setup.deliveries.of("old") == 1
    assert asyncio_setup.queue_depth() == 0


def test_in_progress_retries_stop_at_the_cap_without_a_hot_loop(
    asyncio_setup: AsyncioSetup,
) -> None:
    prefix = asyncio_setup.config.prefix
    body = {"command_id": "busy", "amount": 3}
    with asyncio_setup.worker():
        hold_claim_while(
            asyncio_setup.engine,
            asyncio_setup.inbox,
            body,
            lambda: asyncio_setup.send(body),
            lambda: asyncio_setup.inbox.quarantined("payments"),
        )
        barrier(asyncio_setup)
    [record] = asyncio_setup.inbox.quarantined("payments")
    assert record.reason == QuarantineReason.RETRIES_EXHAUSTED
    assert record.details is not None
    assert record.details["attempt"] == 3
    assert asyncio_setup.deliveries.of("busy") == 3
    assert paid(asyncio_setup.engine, prefix, "busy") == []
    assert asyncio_setup.inbox.lookup("payments", "busy") is None
    assert asyncio_setup.queue_depth() == 0
