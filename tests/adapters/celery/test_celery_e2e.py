"""End-to-end: real ``celery worker`` processes, real brokers, PostgreSQL.

Sizes are a few hundred commands (the issue's 1,000 with INBOXGUARD_FULL_SCALE=1)
to keep the suite fast on a shared 2-core machine; each duplicate-heavy run still
pushes hundreds of concurrent duplicate deliveries through the guard.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest
from kombu import Connection

from integrations.celery.producer import commands, with_copies
from integrations.celery.settings import dead_letter_queue
from tests.adapters.celery.conftest import wait_until
from tests.conftest import DUPLICATED_COMMANDS

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

CONSUMER = "reference.transfers"


def _copies_2_or_3(items: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    rng = random.Random(3)
    out = [c for c in items for _ in range(rng.choice((2, 3)))]
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_c1_duplicate_publishes_with_new_task_ids_apply_once(reference, broker) -> None:
    """Each command published 2-3 times with fresh task ids is applied exactly once."""
    ref = reference(broker)
    ref.worker(concurrency=2)
    # Given commands, each published 2 or 3 times with its own task id
    count = DUPLICATED_COMMANDS
    items = commands(count)
    sent = ref.publish(_copies_2_or_3(items))
    assert sent > 2 * count
    # When the worker has drained the queue
    wait_until(lambda: ref.check().transfers == count, 240, f"{count} transfers applied")
    wait_until(lambda: ref.ready_messages() == 0, 60, "the queue to drain")
    wait_until(lambda: ref.workers[0].log().count(" succeeded in ") >= sent, 120, "every ack")
    # Then every transfer is in the ledger once and balances agree with it
    result = ref.check()
    assert result.rows == count
    assert result.applied_twice == 0
    assert result.balances_match


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_c2_kill9_mid_batch_loses_nothing_and_applies_nothing_twice(reference, broker) -> None:
    """kill -9 of a child and then of the whole worker mid-batch: after a restart every
    command is applied exactly once (acks_late + reject_on_worker_lost + the inbox).

    The whole worker is killed once both children have stopped, one inside its
    transaction and one after its commit with the ack not sent, not at a random
    instant: kombu's Redis transport loses a message popped in the instant
    before it records it as unacked (docs/adapters/celery.md). With both
    children busy the parent has no such pop outstanding."""
    # A short visibility timeout lets Redis restore the dead worker's unacked
    # messages; it stays well above the claim wait (see the start-up warning).
    ref = reference(
        broker,
        task_delay=0.03,
        visibility_timeout=4,
        restore_interval=1,
        lock_timeout=dt.timedelta(milliseconds=500),
    )
    total, first = 150, 30
    in_txn, committed = "tr-60", "tr-61"
    items = commands(total)
    worker = ref.worker(concurrency=2, hang_in_body=in_txn, hang_after_commit=committed)
    ref.publish(items[:first])
    # When a prefork child is killed mid-transaction ...
    wait_until(lambda: ref.check().rows >= 15, 60, "15 transfers applied")
    worker.kill_child()
    wait_until(lambda: ref.check().transfers == first, 60, f"the first {first} transfers")
    # ... and then the whole worker, stopped at two known points
    ref.publish(items[first:])
    for transfer in (in_txn, committed):
        wait_until(lambda t=transfer: f"hang {t}" in worker.log(), 60, f"the hang at {transfer}")
    worker.kill()
    at_kill = ref.check()
    assert at_kill.transfers < total, "the batch finished before the kill; the test proves nothing"
    assert (ref.applied(in_txn), ref.applied(committed)) == (0, 1)
    # Then a restarted worker completes the batch, each command exactly once
    ref.worker(concurrency=2)
    wait_until(lambda: ref.check().transfers == total, 90, f"{total} transfers applied")
    wait_until(lambda: ref.ready_messages() == 0, 30, "the queue to drain")
    if broker == "redis":
        wait_until(lambda: ref.redis_unacked() == 0, 30, "the killed deliveries to be settled")
    result = ref.check()
    assert result.rows == total
    assert result.applied_twice == 0
    assert result.balances_match


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_c3_mismatched_redelivery_is_quarantined_and_dead_lettered(reference, broker) -> None:
    """Same command id, other payload: quarantined with the message, business state
    untouched, and on RabbitMQ the message sits in the dead-letter queue."""
    ref = reference(broker)
    ref.worker(concurrency=2)
    ref.publish([("tr-x", "acct-1", 10)])
    wait_until(lambda: ref.check().rows == 1, 30, "the first delivery applied")
    # When the same command id arrives with another amount
    ref.publish([("tr-x", "acct-1", 99)])
    inbox = ref.inbox()
    [record] = wait_until(lambda: inbox.quarantined(CONSUMER), 30, "a quarantine record")
    # Then it is quarantined with what an operator needs to replay it
    assert record.reason == "payload_mismatch"
    assert record.command_id == "tr-x"
    assert record.details["task"] == "reference.apply_transfer"
    assert record.details["args"] == ["tr-x", "acct-1", 99]
    assert "x-inbox-sent-at" in record.details["headers"]  # the canonical stamp
    # and the business state holds the first payload only
    result = ref.check()
    assert (result.rows, result.applied_twice, result.balances_match) == (1, 0, True)
    if broker == "rabbitmq":
        with Connection(ref.settings.broker_url) as conn:
            dead = dead_letter_queue(ref.settings)(conn.default_channel)
            message = wait_until(lambda: dead.get(no_ack=True), 30, "the dead-lettered message")
        args, _kwargs, _embed = message.decode()
        assert args == ["tr-x", "acct-1", 99]
        assert message.headers["x-death"][0]["reason"] == "rejected"
    else:
        # Redis has no dead-letter queue: the rejected message is neither queued nor
        # held for redelivery; the quarantine row is the record.
        wait_until(lambda: ref.redis_unacked() == 0, 30, "the rejected delivery to be dropped")
        assert ref.ready_messages() == 0


def test_c4_two_workers_on_a_duplicate_heavy_queue_apply_every_command_once(reference) -> None:
    """Two workers with concurrency 2 racing over 3 copies of every command: each once."""
    ref = reference("redis")
    first = ref.worker(concurrency=2)
    second = ref.worker(concurrency=2)
    # 120 commands x 3 copies (360 deliveries) keep both workers, ready before
    # the first delivery, racing at the claim as 250 x 3 did.
    items = commands(120)
    sent = ref.publish(with_copies(items, 3))
    wait_until(lambda: ref.check().transfers == 120, 90, "120 transfers applied")
    wait_until(lambda: ref.ready_messages() == 0, 30, "the queue to drain")
    done = lambda: first.log().count(" succeeded in ") + second.log().count(" succeeded in ")  # noqa: E731
    wait_until(lambda: done() >= sent, 60, "every delivery acked")
    # Both workers took part, and every command was applied once
    assert first.log().count(" succeeded in ") > 0
    assert second.log().count(" succeeded in ") > 0
    result = ref.check()
    assert (result.rows, result.applied_twice, result.balances_match) == (120, 0, True)


def test_c5_misaligned_retention_refuses_to_start_the_worker(reference) -> None:
    """A Redis visibility timeout longer than the evidence horizon stops the worker
    before it consumes anything, with a fatal error in its log and a non-zero exit."""
    ref = reference(
        "redis",
        retention=dt.timedelta(hours=1),
        visibility_timeout=int(dt.timedelta(days=1).total_seconds()),
    )
    ref.publish([("tr-1", "acct-1", 5)])
    worker = ref.worker(start=False).start(wait_ready=False)
    assert worker.proc is not None
    code = worker.proc.wait(60)
    log = worker.log()
    assert code != 0
    assert "refusing to consume" in log
    assert "visibility_timeout" in log
    assert ref.check().rows == 0
    assert ref.ready_messages() == 1
