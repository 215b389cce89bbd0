"""The kombu reference worker, a real process on RabbitMQ and Redis, with PostgreSQL.

A "barrier" command published last and seen applied proves that everything
published before it was consumed: the worker takes one queue in order.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

from inboxguard import QuarantineReason
from inboxguard.adapters.kombu import SENT_AT_HEADER
from tests.adapters.generic_support import hold_claim_while, paid, payments, wait_until
from tests.conftest import DUPLICATED_COMMANDS

from .conftest import KombuSetup

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

COMMANDS = 150
#: The command at which a worker is made to stop, and is killed.
KILLED_AT = 40


def barrier(setup: KombuSetup, name: str = "barrier") -> None:
    setup.send({"command_id": name, "amount": 0})
    wait_until(
        lambda: paid(setup.engine, setup.config.prefix, name), 180, f"{name} applied"
    )  # after up to ~2,500 deliveries
    wait_until(setup.deliveries.settled, 60, "every delivery settled")


def test_duplicated_publishing_applies_each_command_exactly_once(kombu_setup: KombuSetup) -> None:
    rng = random.Random(6)
    bodies = [
        {"command_id": f"pay-{i}", "amount": i}
        for i in range(DUPLICATED_COMMANDS)
        for _ in range(rng.choice((2, 3)))
    ]
    rng.shuffle(bodies)
    with kombu_setup.worker():
        kombu_setup.send(*bodies)
        barrier(kombu_setup)
    assert len(kombu_setup.deliveries.all()) == len(bodies) + 1
    assert payments(kombu_setup.engine, kombu_setup.config.prefix) == (
        DUPLICATED_COMMANDS + 1,
        DUPLICATED_COMMANDS + 1,
    )
    assert kombu_setup.queue_depth() == 0


@pytest.mark.parametrize(
    ("hang", "applied_at_kill"),
    [("INBOXGUARD_HANG_IN_BODY", []), ("INBOXGUARD_HANG_BEFORE_ACK", [KILLED_AT])],
    ids=["mid-transaction", "after-commit-before-ack"],
)
def test_kill_9_mid_stream_loses_nothing_and_applies_nothing_twice(
    kombu_setup: KombuSetup, hang: str, applied_at_kill: list[int]
) -> None:
    """The worker is killed where it stops (inside the transaction, or after
    the commit with the ack not sent), not at a random instant: kombu's Redis
    transport loses a message popped in the instant before it records it as
    unacked (docs/adapters/kombu.md), and a kill there would test the
    transport, not the inbox. While the callback runs, kombu has no such pop
    outstanding."""
    prefix = kombu_setup.config.prefix
    kombu_setup.send(*({"command_id": f"pay-{i}", "amount": i} for i in range(COMMANDS)))
    with kombu_setup.worker(**{hang: f"pay-{KILLED_AT}"}) as worker:
        wait_until(lambda: f"hang pay-{KILLED_AT}" in worker.log.read_text(), 30, "the hang")
        worker.kill9()
    assert payments(kombu_setup.engine, prefix)[0] == KILLED_AT + len(applied_at_kill)
    assert paid(kombu_setup.engine, prefix, f"pay-{KILLED_AT}") == applied_at_kill
    if kombu_setup.unacked() is not None:
        assert kombu_setup.unacked() == 1, "Redis holds the killed delivery for restore"
    kombu_setup.deliveries.forget()
    with kombu_setup.worker():
        wait_until(lambda: payments(kombu_setup.engine, prefix)[1] == COMMANDS, 60, "every payment")
        wait_until(
            lambda: kombu_setup.deliveries.of(f"pay-{KILLED_AT}"), 30, "the killed delivery again"
        )
        barrier(kombu_setup)
    assert payments(kombu_setup.engine, prefix) == (COMMANDS + 1, COMMANDS + 1)
    assert kombu_setup.deliveries.of(f"pay-{KILLED_AT}") == 1
    assert kombu_setup.queue_depth() == 0
    assert kombu_setup.unacked() in (None, 0)


def test_mismatch_is_quarantined_with_the_message_and_not_redelivered(
    kombu_setup: KombuSetup,
) -> None:
    prefix = kombu_setup.config.prefix
    with kombu_setup.worker():
        kombu_setup.send({"command_id": "m1", "amount": 5})
        wait_until(lambda: paid(kombu_setup.engine, prefix, "m1"), 30, "m1 applied")
        kombu_setup.send({"command_id": "m1", "amount": 7}, headers={"trace": "t-1"})
        wait_until(lambda: kombu_setup.inbox.quarantined("payments"), 30, "a quarantine record")
        barrier(kombu_setup)
    [record] = kombu_setup.inbox.quarantined("payments")
    assert record.reason == QuarantineReason.PAYLOAD_MISMATCH
    assert record.details is not None
    assert record.details["body"] == {"command_id": "m1", "amount": 7}
    assert record.details["headers"]["trace"] == "t-1"
    assert "timestamp" in record.details["properties"]
    assert paid(kombu_setup.engine, prefix, "m1") == [5]
    assert kombu_setup.deliveries.of("m1") == 2
    assert kombu_setup.queue_depth() == 0


def test_message_older_than_the_horizon_is_quarantined_not_applied(
    kombu_setup: KombuSetup,
) -> None:
    sent = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).isoformat()
    with kombu_setup.worker():
        kombu_setup.send({"command_id": "old", "amount": 1}, headers={SENT_AT_HEADER: sent})
        wait_until(lambda: kombu_setup.inbox.quarantined("payments"), 30, "a quarantine record")
        barrier(kombu_setup)
    [record] = kombu_setup.inbox.quarantined("payments")
    assert record.reason == QuarantineReason.BEYOND_RETENTION
    assert paid(kombu_setup.engine, kombu_setup.config.prefix, "old") == []
    assert kombu_setup.deliveries.of("old") == 1
    assert kombu_setup.queue_depth() == 0


def test_in_progress_retries_stop_at_the_cap_without_a_hot_loop(kombu_setup: KombuSetup) -> None:
    prefix = kombu_setup.config.prefix
    body = {"command_id": "busy", "amount": 3}
    with kombu_setup.worker():
        hold_claim_while(
            kombu_setup.engine,
            kombu_setup.inbox,
            body,
            lambda: kombu_setup.send(body),
            lambda: kombu_setup.inbox.quarantined("payments"),
        )
        barrier(kombu_setup)
    [record] = kombu_setup.inbox.quarantined("payments")
    assert record.reason == QuarantineReason.RETRIES_EXHAUSTED
    assert record.details is not None
    assert record.details["attempt"] == 3
    assert kombu_setup.deliveries.of("busy") == 3
    assert paid(kombu_setup.engine, prefix, "busy") == []
    assert kombu_setup.inbox.lookup("payments", "busy") is None
    assert kombu_setup.queue_depth() == 0


def test_bodies_without_a_command_id_are_refused_and_the_worker_goes_on(
    kombu_setup: KombuSetup,
) -> None:
    prefix = kombu_setup.config.prefix
    with kombu_setup.worker():
        kombu_setup.send(["not", "a", "dict"], {"amount": 1})  # type: ignore[arg-type]
        barrier(kombu_setup)
    assert payments(kombu_setup.engine, prefix) == (1, 1)  # the barrier alone
    assert kombu_setup.deliveries.all() == ["None", "None", "barrier"]
    assert kombu_setup.queue_depth() == 0
