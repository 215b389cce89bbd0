"""The reference Kafka worker, a real process on aiokafka against a tansu broker,
with PostgreSQL through asyncpg.

A "barrier" command produced last to each partition and seen applied proves
that everything produced before it was consumed (a partition is read in
order). tansu differs from Apache Kafka in ways these tests stay clear of:
no assertion on end offsets or lag, one topic and group per test.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import threading

import pytest
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import QuarantineReason
from inboxguard.adapters.kafka.transport import KafkaTransport
from inboxguard.outbox import OutboxMessage
from integrations.kafka.topics import PARTITIONS, bootstrap, dead_letter_topic, declare
from tests.adapters.generic_support import hold_claim_while, paid, payments, wait_until

from .support import KafkaSetup

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

#: Commands of the duplicated-producing test, each produced 2 or 3 times.
DUPLICATED = 60
#: Commands of the kill test, and the one killed after its commit.
COMMANDS, KILLED = 20, 10
#: Commands produced while the group rebalances.
FLOWING = 120
#: One record per transaction; one batch per transaction, with partition watermarks.
MODES = {
    "record": {},
    "batch": {"INBOXGUARD_KAFKA_BATCH": "1", "INBOXGUARD_KAFKA_WATERMARKS": "1"},
}
#: Rows the outbox relays to the worker's topic before it starts.
OUTBOX_ROWS = [{"command_id": f"ob-{i}", "amount": i} for i in range(5)]


def barriers(setup: KafkaSetup) -> None:
    """One barrier per partition key until each partition's barrier is applied."""
    names = [f"barrier-{i}" for i in range(PARTITIONS * 4)]
    setup.send(*({"command_id": n, "amount": 0} for n in names))
    prefix = setup.config.prefix
    wait_until(lambda: all(paid(setup.engine, prefix, n) for n in names), 60, "the barriers")
    wait_until(setup.deliveries.settled, 30, "every delivery settled")


@pytest.mark.parametrize("mode", list(MODES))
def test_kf1_kf2_kf3_kf7_duplicates_mismatch_retries_and_the_outbox(
    kafka_setup: KafkaSetup, mode: str
) -> None:
    """One worker session, per record and per batch: copies of a command
    produced 2-3 times are applied once (KF1); a payload mismatch is
    quarantined and produced to the dead-letter topic (KF2); a claim held
    elsewhere is retried in place up to the cap, then quarantined as
    retries_exhausted and dead-lettered (KF3); outbox rows relayed by
    KafkaTransport, one of them sent twice, are applied once (KF7)."""
    setup, prefix = kafka_setup, kafka_setup.config.prefix
    outbox = relay_with_a_resend(setup)
    rng = random.Random(36)
    bodies = [
        {"command_id": f"pay-{i}", "amount": i}
        for i in range(DUPLICATED)
        for _ in range(rng.choice((2, 3)))
    ]
    rng.shuffle(bodies)
    busy = {"command_id": "busy", "amount": 3}
    with setup.worker(**MODES[mode]) as worker:
        setup.send({"command_id": "m1", "amount": 5})
        wait_until(lambda: paid(setup.engine, prefix, "m1"), 60, "m1 applied")
        setup.send(*bodies, {"command_id": "m1", "amount": 7})
        hold_claim_while(
            setup.engine,
            setup.inbox,
            busy,
            lambda: setup.send(busy),
            lambda: len(setup.inbox.quarantined("payments")) == 2,
        )
        barriers(setup)
    expected = DUPLICATED + 1 + len(OUTBOX_ROWS) + PARTITIONS * 4
    assert payments(setup.engine, prefix) == (expected, expected)
    assert paid(setup.engine, prefix, "m1") == [5]
    assert paid(setup.engine, prefix, "busy") == []
    by_reason = {r.reason: r for r in setup.inbox.quarantined("payments")}
    assert set(by_reason) == {
        QuarantineReason.PAYLOAD_MISMATCH,
        QuarantineReason.RETRIES_EXHAUSTED,
    }
    mismatch = by_reason[QuarantineReason.PAYLOAD_MISMATCH].details
    assert mismatch is not None
    assert mismatch["body"] == {"command_id": "m1", "amount": 7}
    assert mismatch["properties"]["topic"] == setup.config.queue
    dead = setup.topic(dead_letter_topic(setup.config), 2)
    assert sorted(dead, key=lambda b: b["command_id"]) == [busy, {"command_id": "m1", "amount": 7}]
    # every handler run was one application: each command's handler ran once
    started = setup.deliveries.all()
    assert sorted(set(started)) == sorted(started)
    for body in OUTBOX_ROWS:
        assert paid(setup.engine, prefix, body["command_id"]) == [body["amount"]]
    assert "ob-1 is a duplicate" in worker.log.read_text()
    assert outbox.status().backlog == 0
    outbox.drop_schema()


@pytest.mark.parametrize("watermarks", ["0", "1"])
def test_kf4_kf5_kill_9_after_the_commit_before_the_offset_commit(
    kafka_setup: KafkaSetup, watermarks: str
) -> None:
    """A worker killed after its transaction committed and before its offset
    commit leaves the offset behind: its successor reads the record again and
    the inbox answers it as a duplicate (KF4); with partition watermarks the
    successor seeks past it instead (KF5). Either way it is applied once."""
    setup, prefix = kafka_setup, kafka_setup.config.prefix
    setup.send(*({"command_id": f"pay-{i}", "amount": i} for i in range(COMMANDS)))
    env = {"INBOXGUARD_KAFKA_WATERMARKS": watermarks}
    with setup.worker("first.log", INBOXGUARD_HANG_BEFORE_ACK=f"pay-{KILLED}", **env) as first:
        wait_until(lambda: f"hang pay-{KILLED}" in first.log.read_text(), 60, "the hang")
        first.kill9()
    assert paid(setup.engine, prefix, f"pay-{KILLED}") == [KILLED]
    with setup.worker("second.log", **env) as second:
        wait_until(lambda: payments(setup.engine, prefix)[1] == COMMANDS, 60, "every payment")
        barriers(setup)
    assert payments(setup.engine, prefix) == (COMMANDS + PARTITIONS * 4,) * 2
    assert paid(setup.engine, prefix, f"pay-{KILLED}") == [KILLED]
    assert setup.deliveries.of(f"pay-{KILLED}") == 1
    log = second.log.read_text()
    if watermarks == "1":
        assert "below their partition's watermark; skipped" in log
        assert f"pay-{KILLED} is a duplicate" not in log
    else:
        assert f"pay-{KILLED} is a duplicate" in log


def test_kf6_a_rebalance_while_records_flow_applies_each_command_once(
    kafka_setup: KafkaSetup,
) -> None:
    """Two members share the topic while records flow: one joins, then the
    first one leaves (SIGTERM) mid-flow; every command is applied once (KF6)."""
    setup, prefix = kafka_setup, kafka_setup.config.prefix
    slow = {"INBOXGUARD_HANDLER_DELAY_MS": "20"}
    bodies = [{"command_id": f"pay-{i}", "amount": i} for i in range(FLOWING)]
    first = setup.started("first.log", **slow)
    try:
        producing = threading.Thread(target=setup.send, args=tuple(bodies))
        producing.start()
        wait_until(lambda: payments(setup.engine, prefix)[1] >= 10, 60, "the first payments")
        with setup.worker("second.log", **slow):
            wait_until(
                lambda: payments(setup.engine, prefix)[1] >= FLOWING // 2, 60, "half the payments"
            )
            first.stop()
            producing.join(60)
            wait_until(lambda: payments(setup.engine, prefix)[1] == FLOWING, 90, "every payment")
            barriers(setup)
    finally:
        first.stop()
    assert payments(setup.engine, prefix) == (FLOWING + PARTITIONS * 4,) * 2
    assert "ready" in (setup.tmp / "second.log").read_text()


def relay_with_a_resend(setup: KafkaSetup) -> inboxguard.Outbox:
    """Relay OUTBOX_ROWS outbox rows through KafkaTransport (keyed, acks=all, the
    command ID header), then send one again as a dispatcher that died after
    the send would."""
    config = setup.config
    outbox = inboxguard.Outbox(setup.engine, table_prefix=f"{config.prefix}o_")
    outbox.create_schema()
    with Session(setup.engine) as session, session.begin():
        for body in OUTBOX_ROWS:
            outbox.add(
                session, command_id=body["command_id"], destination=config.queue, payload=body
            )
    asyncio.run(declare(config))
    transport = KafkaTransport(bootstrap(config), key=lambda m: m.command_id)
    try:
        assert inboxguard.Dispatcher(outbox, transport).run_once() == len(OUTBOX_ROWS)
        resend = OutboxMessage(
            command_id="ob-1",
            destination=config.queue,
            payload=OUTBOX_ROWS[1],
            headers={"x-inbox-command-id": "ob-1"},
            digest="",
            created_at=dt.datetime.now(dt.UTC),
        )
        assert transport(resend)["topic"] == config.queue
    finally:
        transport.close()
    return outbox
