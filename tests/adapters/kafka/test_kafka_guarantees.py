"""The guarded Kafka consumer in ``inboxguard guarantees``: its delivery mode
in Kafka's terms (offsets committed after the evidence), the settings that
contradict it, and the topic retention it reads at start-up."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.kafka import GuardedConsumer
from integrations.kafka import worker
from integrations.kafka.topics import declare
from integrations.payments import async_url

from .support import KafkaSetup
from .tansu import HEARTBEAT_MS, SESSION_TIMEOUT_MS

pytestmark = [pytest.mark.postgresql]

GUARANTEE = inboxguard.Guarantee(no_external_effect=True)


def test_kf16_the_reference_worker_table_derives_from_offsets_without_contradiction(
    monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """The reference Kafka worker's table (what ``inboxguard guarantees --app
    'integrations.kafka.worker:build()' --check`` reads): the delivery mode
    and the lost-ack example speak of offset commits, and nothing
    contradicts it (KF16)."""
    monkeypatch.setenv("INBOXGUARD_DB_URL", pg_url)
    inbox = asyncio.run(worker.build())
    (table,) = inboxguard.guarantees_of(inbox)
    assert inboxguard.contradictions_of(inbox) == []
    assert table.consumer == "payments"
    mode = table.delivery_mode
    assert mode.source == "derived"
    assert mode.value is not None
    assert "offset is committed only after its transaction commits" in mode.value
    assert "ack" not in mode.value.replace("back", "")
    assert mode.settings["enable_auto_commit"] is False
    assert mode.settings["group_id"] == "payments"
    assert table.lost_ack_example is not None
    assert "dies before its offset commit" in table.lost_ack_example
    assert "connection close" not in table.lost_ack_example
    inbox.engine.dispose()


@pytest.mark.parametrize(
    ("options", "setting"),
    [({"enable_auto_commit": True}, "enable_auto_commit"), ({"group_id": None}, "group_id")],
)
def test_kf16_a_consumer_that_commits_early_or_never_is_a_contradiction(
    sqlite_url: str, options: dict[str, Any], setting: str
) -> None:
    """Auto-commit (offsets committed on a timer, before the transaction) and a
    consumer with no group (no offset committed) contradict the delivery mode,
    naming the setting, before the consumer is started (KF16)."""

    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7))

    async def declared() -> None:
        consumer = AIOKafkaConsumer(**{"group_id": "g", "enable_auto_commit": False, **options})
        GuardedConsumer(
            consumer,
            inbox,
            name="billing",
            topics=["charges"],
            session_factory=async_sessionmaker(),
            guarantee=GUARANTEE,
        )
        await consumer.stop()

    asyncio.run(declared())
    (problem,) = inboxguard.contradictions_of(inbox)
    assert (problem.field, problem.setting) == ("delivery_mode", setting)
    engine.dispose()


def test_kf16_start_adds_the_topic_retention_to_the_table(kafka_setup: KafkaSetup) -> None:
    """Once started, a group resetting to ``earliest`` lists its topic's
    retention, read from the broker, among the table's replay windows (KF16)."""
    setup = kafka_setup
    inbox = setup.inbox
    inbox.create_schema()

    async def started() -> None:
        await declare(setup.config)
        engine = create_async_engine(async_url(setup.config.db_url))
        consumer = AIOKafkaConsumer(
            bootstrap_servers=setup.config.broker_url.removeprefix("kafka://"),
            group_id="payments",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
        )
        guarded = GuardedConsumer(
            consumer,
            inbox,
            name="payments",
            topics=[setup.config.queue],
            session_factory=async_sessionmaker(engine),
            guarantee=GUARANTEE,
        )
        assert "kafka_topic_retention" not in _windows(inbox)
        await guarded.start()
        try:
            # integrations/kafka/topics.py keeps its topics one hour
            assert _windows(inbox)["kafka_topic_retention"] == "1h"
        finally:
            await consumer.stop()
            await engine.dispose()

    asyncio.run(started())
    assert inboxguard.contradictions_of(inbox) == []


def _windows(inbox: inboxguard.Inbox) -> dict[str, Any]:
    (table,) = inboxguard.guarantees_of(inbox)
    return dict(table.dedup_window.settings)
