"""GuardedConsumer on confluent-kafka (librdkafka) in the test's own event loop,
against tansu and PostgreSQL: the aiokafka consumer's outcomes through the
other client. Records are produced by librdkafka's idempotent producer
(tansu accepts it; it does not isolate transactions, which are not used)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from confluent_kafka import Producer
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard import QuarantineReason
from inboxguard.adapters.kafka import GuardedConsumer
from inboxguard.adapters.kafka.confluent import (
    ConfluentConsumer,
    ConfluentProducer,
    ConfluentRecord,
)
from inboxguard.errors import ConfigurationError
from integrations.payments import async_url, payments_table
from tests.adapters.generic_support import paid, payments
from tests.adapters.kafka.support import read_topic
from tests.adapters.kafka.tansu import HEARTBEAT_MS, SESSION_TIMEOUT_MS
from tests.conftest import unique

from .test_kafka_consumer import topic, until

pytestmark = [pytest.mark.postgresql]

#: Commands produced twice each, and the one whose handler fails once.
COMMANDS, FLAKY = 12, "pay-5"


@pytest.fixture
def box(pg_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(pg_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    inbox.create_schema()
    payments_table(prefix).metadata.create_all(engine)
    yield inbox
    inbox.drop_schema()
    engine.dispose()


def librdkafka(url: str, group: str, **options: Any) -> ConfluentConsumer:
    return ConfluentConsumer(
        {
            "bootstrap.servers": url,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            **options,
        }
    )


def produce(url: str, name: str, bodies: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": url, "enable.idempotence": True, "acks": "all"})
    for body in bodies:
        cid = body["command_id"]
        producer.produce(
            name,
            value=json.dumps(body).encode(),
            key=cid.encode(),
            headers=[("x-inbox-command-id", cid.encode())],
        )
    assert producer.flush(30) == 0
    getattr(producer, "close", lambda: None)()


async def committed(url: str, name: str, group: str, partitions: int) -> int:
    """The group's committed offsets, summed over the topic's partitions."""
    reader = AIOKafkaConsumer(bootstrap_servers=url, group_id=group, enable_auto_commit=False)
    await reader.start()
    try:
        found = [await reader.committed(TopicPartition(name, p)) for p in range(partitions)]
    finally:
        await reader.stop()
    return sum(offset or 0 for offset in found)


@pytest.mark.parametrize("mode", ["record", "batch"])
def test_kf17_a_confluent_consumer_applies_each_command_once_and_commits_after(
    box: inboxguard.Inbox, pg_url: str, kafka_url: str, mode: str
) -> None:
    """Through librdkafka, per record and per polled batch (with partition
    watermarks): copies are skipped by the outbox's header, a handler failure
    is retried in place, a mismatch is quarantined and dead-lettered, every
    offset is committed once its record is settled, and a new member of the
    group resumes from those offsets without running any command again (KF17)."""
    table = payments_table(box.table_prefix)
    group = unique("g")
    ran: list[str] = []
    failed: list[str] = []

    async def pay(body: dict[str, Any], record: Any) -> dict[str, Any]:
        assert isinstance(record, ConfluentRecord)
        assert record.key == body["command_id"].encode()
        ran.append(body["command_id"])
        await inboxguard.current_session().execute(
            insert(table).values(command_id=body["command_id"], amount=body["amount"])
        )
        if body["command_id"] == FLAKY and not failed:
            failed.append(FLAKY)
            raise RuntimeError("the ledger is briefly unavailable")
        return {"applied": body["amount"]}

    async def pay_batch(batch: inboxguard.InboxBatch, records: Any) -> None:
        for entry in batch.fresh:
            entry.result = await pay(entry.payload, records[entry.index])

    async def consume(name: str, until_done: Any) -> None:
        engine = create_async_engine(async_url(pg_url))
        producer = ConfluentProducer({"bootstrap.servers": kafka_url})
        guarded = GuardedConsumer(
            librdkafka(kafka_url, group),
            box,
            name="payments",
            topics=[name],
            session_factory=async_sessionmaker(engine),
            max_attempts=3,
            retry_delay=dt.timedelta(milliseconds=100),
            producer=producer,
            dead_letter_topic=f"{name}.dlq",
            watermarks=mode == "batch",
            shared_consumer=True,  # two members of the group in turn, one inbox
        )
        await guarded.start()
        task = asyncio.create_task(
            guarded.run_batch(pay_batch) if mode == "batch" else guarded.run(pay)
        )
        try:
            await until_done()
        finally:
            guarded.stop()
            await task
            await guarded.consumer.stop()
            await producer.stop()
            await engine.dispose()

    async def scenario() -> None:
        name = await topic(kafka_url, partitions=2)
        await topic_named(kafka_url, f"{name}.dlq")
        bodies = [{"command_id": f"pay-{i}", "amount": i} for i in range(COMMANDS) for _ in "ab"]
        produce(kafka_url, name, [*bodies, {"command_id": "pay-1", "amount": 99}])
        total = len(bodies) + 1

        async def settled() -> None:
            await until(lambda: payments(box.engine, box.table_prefix)[1] == COMMANDS, "payments")
            await until(lambda: box.quarantined("payments"), "the mismatch quarantined")
            await until_async(
                lambda: committed(kafka_url, name, group, 2), total, "every offset committed"
            )

        await consume(name, settled)
        assert await committed(kafka_url, name, group, 2) == total
        dead = await read_topic(kafka_url, f"{name}.dlq", 1, 30)
        before = list(ran)
        produce(kafka_url, name, [{"command_id": "barrier", "amount": 0}])

        async def barrier() -> None:
            await until(lambda: paid(box.engine, box.table_prefix, "barrier"), "the barrier")

        await consume(name, barrier)
        assert ran == [*before, "barrier"]
        assert dead == [{"command_id": "pay-1", "amount": 99}]

    asyncio.run(scenario())
    assert payments(box.engine, box.table_prefix) == (COMMANDS + 1, COMMANDS + 1)
    assert paid(box.engine, box.table_prefix, "pay-1") == [1]
    assert failed == [FLAKY]
    # the failed attempt rolled back; the retry in place applied it
    assert sorted(ran).count(FLAKY) == 2
    assert paid(box.engine, box.table_prefix, FLAKY) == [5]
    (record,) = box.quarantined("payments")
    assert record.reason == QuarantineReason.PAYLOAD_MISMATCH


def test_kf17_start_refuses_librdkafkas_default_auto_commit(
    box: inboxguard.Inbox, pg_url: str, kafka_url: str
) -> None:
    """librdkafka commits offsets on a timer unless told not to: a consumer
    config without ``enable.auto.commit: False`` is refused at start, and so
    is one without a ``group.id`` (KF17)."""

    async def scenario() -> None:
        engine = create_async_engine(async_url(pg_url))
        for config, setting in [
            ({"bootstrap.servers": kafka_url, "group.id": "g"}, "enable_auto_commit"),
            ({"bootstrap.servers": kafka_url, "enable.auto.commit": "false"}, "group_id"),
        ]:
            guarded = GuardedConsumer(
                ConfluentConsumer(config),
                box,
                name=unique("c"),
                topics=["t"],
                session_factory=async_sessionmaker(engine),
            )
            with pytest.raises(ConfigurationError, match=setting):
                await guarded.start()
        await engine.dispose()

    asyncio.run(scenario())


async def topic_named(url: str, name: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=url)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        await admin.close()


async def until_async(read: Any, expected: int, what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (found := await read()) != expected:
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} ({found})")
        await asyncio.sleep(0.2)
