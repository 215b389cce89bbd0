"""A declared failure is not retried (issue 19): a kombu consumer on RabbitMQ whose
handler meets ``ReconciliationRequiredError`` from a real ``EffectLedger`` tries
once, quarantines the delivery and dead-letters it; the effect's history gains
one attempt's worth of events, not ``max_attempts`` of them."""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard import EffectLedger, EffectOutcomeUnknownError, ReconciliationRequiredError
from inboxguard.adapters.kombu import guarded
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import AMQP_URL, FakeClock, require_service, unique

KEY = "charge-1"
PAYLOAD = {"amount": 42}
LEASE = dt.timedelta(seconds=30)
WINDOW = dt.timedelta(hours=24)


@pytest.fixture
def pg(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


def _events(ledger: EffectLedger) -> tuple[int, int]:
    record = ledger.get(KEY)
    assert record is not None
    return len(record.history), record.fencing_token


def test_reconciliation_required_is_tried_once_quarantined_and_dead_lettered(
    pg: Engine, prefix: str, clock: FakeClock
) -> None:
    require_service("rabbitmq")
    ledger = EffectLedger(pg, table_prefix=prefix + "l", clock=clock, actor="test")
    gateway = SandboxGateway(
        pg, table_prefix=prefix + "g", window=WINDOW, supports_lookup=False, clock=clock
    )
    inbox = inboxguard.Inbox(pg, retention=dt.timedelta(days=1), table_prefix=prefix)
    for part in (ledger, gateway, inbox):
        part.create_schema()
    # A charge whose outcome is unknown once the provider's window has closed:
    # only an operator can settle it. One direct call measures one attempt.
    gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    clock.advance(WINDOW)
    before = _events(ledger)
    with pytest.raises(ReconciliationRequiredError):
        ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    one = _events(ledger)
    per_attempt = (one[0] - before[0], one[1] - before[1])

    calls: list[str] = []

    def handler(body: dict[str, Any], message: Message) -> None:
        calls.append(body["command_id"])
        ledger.execute(KEY, gateway, body["charge"], lease=LEASE)

    callback = guarded(
        handler,
        inbox,
        session_factory=sessionmaker(pg),
        command_id="command_id",
        consumer="billing",
        max_attempts=3,
        retry_delay=dt.timedelta(0),
    )
    name = unique("q")
    dead = Queue(name + ".dead", durable=False, auto_delete=False)
    queue = Queue(
        name,
        durable=False,
        queue_arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dead.name},
    )
    try:
        with Connection(AMQP_URL) as conn:
            channel = conn.default_channel
            dead(channel).declare()
            Producer(channel).publish(
                {"command_id": "order-1", "charge": PAYLOAD},
                routing_key=name,
                declare=[queue],
                serializer="json",
                timestamp=int(time.time()),
            )
            with Consumer(channel, queues=[queue], callbacks=[callback], accept=["json"]):
                deadline = time.monotonic() + 20
                while _depth(channel, dead) == 0 and time.monotonic() < deadline:
                    with contextlib.suppress(TimeoutError):
                        conn.drain_events(timeout=0.5)
            assert (_depth(channel, dead), _depth(channel, queue)) == (1, 0)
            queue(channel).delete()
            dead(channel).delete()
        assert calls == ["order-1"]
        after = _events(ledger)
        assert (after[0] - one[0], after[1] - one[1]) == per_attempt
        [record] = inbox.quarantined("billing")
        assert (record.command_id, record.reason) == ("order-1", "reconciliation_required")
        assert inbox.lookup("billing", "order-1") is None  # not applied
    finally:
        for part in (inbox, gateway, ledger):
            part.drop_schema()


def _depth(channel: Any, queue: Queue) -> int:
    _, count, _ = queue(channel).queue_declare(passive=True)
    return int(count)
