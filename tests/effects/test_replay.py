"""L19: an operator can finish a command that waited on an unknown effect.

A kombu consumer (the ``guarded`` callback, run in this process against the
real RabbitMQ) charges through the ledger; the gateway charges but every
answer is lost, so the consumer gives up (``retries_exhausted``) and the
message is quarantined. The operator records the verdict
(``inboxguard effects resolve``), then replays the quarantined message
(``inboxguard quarantine replay``) through the outbox's kombu transport; the
consumer finishes the command from the ledger's record without calling the
provider again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Queue
from kombu.message import Message
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from inboxguard import EffectLedger, EffectState, Inbox
from inboxguard.adapters.kombu import guarded
from inboxguard.adapters.kombu.transport import KombuTransport
from inboxguard.cli import main
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import AMQP_URL, require_service, unique

CONSUMER = "billing.charge-invoice"


def kombu_transport() -> KombuTransport:
    """The ``--transport`` factory: the outbox's kombu transport on RabbitMQ."""
    return KombuTransport(Connection(AMQP_URL))


@pytest.fixture
def parts(pg_url: str, prefix: str) -> Iterator[tuple[Engine, Inbox, EffectLedger, SandboxGateway]]:
    require_service("rabbitmq")
    engine = create_engine(pg_url)
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    ledger = EffectLedger(engine, table_prefix=prefix)
    gateway = SandboxGateway(engine, table_prefix=prefix + "gw_", supports_lookup=False)
    for part in (inbox, ledger, gateway):
        part.create_schema()
    yield engine, inbox, ledger, gateway
    for part in (gateway, ledger, inbox):
        part.drop_schema()
    engine.dispose()


def drain_until(conn: Connection, queue: Queue, callback: Any, done: Callable[[], bool]) -> None:
    """Consume with ``callback`` until ``done()`` holds (deadline: 30 s)."""
    deadline = time.monotonic() + 30
    with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
        while not done():
            assert time.monotonic() < deadline, "the consumer did not get there in 30 s"
            with contextlib.suppress(TimeoutError):
                conn.drain_events(timeout=0.5)


def test_l19_resolve_then_replay_finishes_the_command_without_a_new_provider_call(
    parts: tuple[Engine, Inbox, EffectLedger, SandboxGateway],
    pg_url: str,
    prefix: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine, inbox, ledger, gateway = parts
    body = {"command_id": "cmd-42", "invoice_id": 42, "amount": 1500}
    key = "invoice-42/charge"

    def charge(message_body: dict[str, Any], message: Message) -> dict[str, str]:
        receipt = ledger.execute(key, gateway, {"amount": message_body["amount"]})
        return {"charge": receipt.reference}

    callback = guarded(
        charge,
        inbox,
        session_factory=sessionmaker(engine),
        command_id="command_id",
        consumer=CONSUMER,
        max_attempts=2,
        retry_delay=dt.timedelta(milliseconds=50),
    )
    queue = Queue(unique("replay"), durable=False, auto_delete=False)
    db = ["--db", pg_url, "--prefix", prefix]
    with Connection(AMQP_URL) as conn:
        queue(conn.default_channel).declare()
        try:
            # The charge goes through twice over, but both answers are lost.
            gateway.script = ["accept_then_timeout", "accept_then_timeout"]
            conn.Producer().publish(body, routing_key=queue.name, serializer="json")
            drain_until(conn, queue, callback, lambda: bool(inbox.quarantined(CONSUMER)))
            [record] = inbox.quarantined(CONSUMER)
            assert record.reason == "retries_exhausted"
            assert (gateway.requests(), gateway.charges()) == (2, 1)
            assert ledger.get(key).state is EffectState.UNKNOWN  # type: ignore[union-attr]
            assert inbox.lookup(CONSUMER, "cmd-42") is None

            # The operator checks the provider and records the verdict ...
            assert (
                main(["effects", "resolve", key, "--applied", "ch_1", "--note", "seen", *db]) == 0
            )
            capsys.readouterr()
            # ... then replays the message, which the consumer finishes.
            assert (
                main(
                    [
                        "quarantine",
                        "replay",
                        str(record.id),
                        "--transport",
                        "tests.effects.test_replay:kombu_transport",
                        "--reason",
                        "charge ch_1 confirmed in the dashboard",
                        "--by",
                        "alice",
                        *db,
                        "--json",
                    ]
                )
                == 0
            )
            printed = json.loads(capsys.readouterr().out)
            assert printed["destination"] == queue.name
            drain_until(conn, queue, callback, lambda: inbox.lookup(CONSUMER, "cmd-42") is not None)
        finally:
            queue(conn.default_channel).delete()

    evidence = inbox.lookup(CONSUMER, "cmd-42")
    assert evidence is not None
    assert evidence.result == {"charge": "ch_1"}
    assert (gateway.requests(), gateway.charges()) == (2, 1)  # no new provider call
    after = inbox.quarantine_record(record.id)
    assert after is not None
    assert after.status == "resolved"
    [replay] = inbox.quarantine_replays(record.id)
    assert (replay.replayed_by, replay.reason, replay.destination, replay.command_id) == (
        "alice",
        "charge ch_1 confirmed in the dashboard",
        queue.name,
        "cmd-42",
    )
    assert replay.receipt == {"message_id": "cmd-42", "routing_key": queue.name}
