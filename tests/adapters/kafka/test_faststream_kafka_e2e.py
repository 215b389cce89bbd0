"""The FastStream reference worker on Kafka, a real process (FastStream's
KafkaBroker on aiokafka) against a tansu broker, with PostgreSQL through
asyncpg."""

from __future__ import annotations

import pytest

from tests.adapters.generic_support import paid, payments, wait_until

from .support import KafkaSetup
from .test_kafka_e2e import COMMANDS, KILLED, PARTITIONS, barriers

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]


def test_kf15_faststream_kill_9_after_the_commit_before_the_offset_commit(
    kafka_setup: KafkaSetup,
) -> None:
    """A FastStream Kafka worker killed after a command's transaction committed
    and before the guard committed its offset: the successor reads the record
    again, the guard answers it as a duplicate, and every command is applied
    once (KF15)."""
    setup, prefix = kafka_setup, kafka_setup.config.prefix
    setup.send(*({"command_id": f"pay-{i}", "amount": i} for i in range(COMMANDS)))
    with setup.faststream("first.log", INBOXGUARD_HANG_BEFORE_ACK=f"pay-{KILLED}") as first:
        wait_until(lambda: f"hang pay-{KILLED}" in first.log.read_text(), 60, "the hang")
        first.kill9()
    assert paid(setup.engine, prefix, f"pay-{KILLED}") == [KILLED]
    assert setup.deliveries.of(f"pay-{KILLED}") == 1
    setup.deliveries.forget()  # the killed delivery never settles
    with setup.faststream("second.log"):
        wait_until(lambda: payments(setup.engine, prefix)[1] == COMMANDS, 60, "every payment")
        barriers(setup)
    assert payments(setup.engine, prefix) == (COMMANDS + PARTITIONS * 4,) * 2
    assert paid(setup.engine, prefix, f"pay-{KILLED}") == [KILLED]
    # the record whose offset the killed worker never committed came back
    # (the delivery log sits outside the guard) and was skipped as a duplicate
    assert setup.deliveries.of(f"pay-{KILLED}") == 1
    assert setup.inbox.quarantined("payments") == []
