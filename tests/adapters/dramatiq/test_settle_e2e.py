"""D10-D12: a Dramatiq worker never lets go of a command nothing settled
(issue 20), in real ``dramatiq`` worker processes on Redis with PostgreSQL."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from integrations.dramatiq.model import applications, make_inbox
from integrations.dramatiq.producer import send_commands, ship_message
from integrations.dramatiq.settings import Settings
from tests.adapters.dramatiq.conftest import pending, wait_until
from tests.adapters.dramatiq.test_e2e import dead_letters

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgresql,
    pytest.mark.parametrize("broker_name", ["redis"], indirect=True),
]
CONSUMER = "shipping.ship"


def test_d10_a_worker_on_a_database_without_the_inbox_tables_refuses_to_boot(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """No inbox tables: the worker exits at boot naming create_schema(), and the
    queued commands are still in the broker."""
    make_inbox(engine, app_settings.prefix, 45).drop_schema()
    send_commands(producer, app_settings.queue, ["order-1", "order-2"])
    worker = start_worker(threads=1)
    wait_until(lambda: worker.proc.poll() is not None, 30, "the worker to refuse to start")
    assert worker.proc.returncode != 0
    assert "create_schema()" in worker.text()
    assert "Worker process is ready for action." not in worker.text()
    assert pending(producer, app_settings.queue) == 2


def test_d11_a_delayed_message_is_judged_from_when_it_was_due(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """A message sent longer ago than the horizon but delayed until now is
    applied; the same age without a delay is still refused as too old."""
    inbox = make_inbox(engine, app_settings.prefix, app_settings.retention_days)
    old = time.time() - inbox.retention.horizon.total_seconds() - 300
    stamp = {"message_timestamp": int(old * 1000)}
    worker = start_worker(threads=2)
    worker.wait_ready()
    producer.enqueue(dataclasses.replace(ship_message(app_settings.queue, "late-old"), **stamp))
    wait_until(lambda: inbox.quarantined(CONSUMER), 30, "the stale message refused")
    delayed = dataclasses.replace(ship_message(app_settings.queue, "late-due"), **stamp)
    producer.enqueue(delayed, delay=500)
    wait_until(
        lambda: applications(engine, app_settings.prefix).get("late-due") == 1, 30, "applied"
    )
    [record] = inbox.quarantined(CONSUMER)
    assert (record.command_id, record.reason) == ("late-old", "beyond_retention")


def test_d12_a_quarantine_record_that_cannot_be_written_keeps_the_message(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """A payload mismatch whose quarantine record cannot be written is sent
    back to the broker (logged at ERROR), not dead-lettered without its
    record; once the table is back, it is quarantined and dead-lettered."""
    inbox = make_inbox(engine, app_settings.prefix, app_settings.retention_days)
    worker = start_worker(threads=2)
    worker.wait_ready()
    producer.enqueue(ship_message(app_settings.queue, "order-1", qty=1))
    wait_until(lambda: applications(engine, app_settings.prefix) == {"order-1": 1}, 30, "applied")
    table = inbox.tables.quarantine.name
    with engine.begin() as conn:
        conn.execute(text(f'ALTER TABLE "{table}" RENAME TO "{table}_away"'))
    try:
        producer.enqueue(ship_message(app_settings.queue, "order-1", qty=99))
        wait_until(lambda: "goes back to the broker" in worker.text(), 30, "a requeue")
        assert dead_letters(producer, app_settings.queue) == []
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'ALTER TABLE "{table}_away" RENAME TO "{table}"'))
    [record] = _wait_records(inbox)
    assert (record.command_id, record.reason) == ("order-1", "payload_mismatch")
    wait_until(lambda: dead_letters(producer, app_settings.queue), 30, "the dead letter")
    assert applications(engine, app_settings.prefix) == {"order-1": 1}


def _wait_records(inbox: Any) -> list[Any]:
    found: list[Any] = []

    def ready() -> bool:
        found[:] = inbox.quarantined(CONSUMER)
        return bool(found)

    wait_until(ready, 60, "the quarantine record")
    return found
