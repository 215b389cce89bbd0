"""InboxMiddleware on FastStream's KafkaBroker, inside the test's own event loop,
against a tansu broker started for this module, with PostgreSQL through
asyncpg: the same outcomes as on the other brokers, a dead-letter topic,
AckPolicy.MANUAL required, batch subscribers, offsets committed after."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from sqlalchemy import create_engine, insert
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard import QuarantineReason
from inboxguard.adapters.faststream import InboxMiddleware, current_batch
from inboxguard.errors import ConfigurationError, RetentionMisalignedError
from integrations.payments import async_url, payments_table
from tests.adapters.generic_support import hold_claim_while, paid, payments
from tests.adapters.kafka.support import read_topic
from tests.adapters.kafka.tansu import CONSUMER, tansu
from tests.conftest import unique

from .support import eventually, started

pytestmark = [pytest.mark.postgresql]


@pytest.fixture(scope="module")
def kafka_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as url:
        yield url


@pytest.fixture
def box(pg_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(pg_url)
    inbox = inboxguard.Inbox(
        engine,
        retention=dt.timedelta(days=7),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=150),
    )
    inbox.create_schema()
    payments_table(prefix).metadata.create_all(engine)
    yield inbox
    inbox.drop_schema()
    engine.dispose()


async def new_topic(url: str, retention_ms: int = 3_600_000) -> str:
    name = unique("topic")
    admin = AIOKafkaAdminClient(bootstrap_servers=url)
    await admin.start()
    try:
        await admin.create_topics(
            [
                NewTopic(n, 1, 1, topic_configs={"retention.ms": str(retention_ms)})
                for n in (name, f"{name}.dlq")
            ]
        )
    finally:
        await admin.close()
    return name


def guard_of(
    box: inboxguard.Inbox, pg_url: str, dlq: str | None, *, sync: bool = False, **options: Any
) -> Any:
    engine = create_async_engine(async_url(pg_url))
    factories: dict[str, Any] = (
        {"session_factory": sessionmaker(box.engine)}
        if sync
        else {"async_session_factory": async_sessionmaker(engine)}
    )
    return InboxMiddleware(
        box,
        consumer="payments",
        command_id="command_id",
        **factories,
        max_attempts=3,
        retry_delay=dt.timedelta(milliseconds=200),
        dead_letter_topic=dlq,
        **options,
    ), engine


async def committed(url: str, topic: str, group: str, expected: int, timeout: float = 30) -> int:
    """The group's committed offset of partition 0 once it reaches ``expected``
    (or whatever it is at the deadline)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=url, group_id=group, enable_auto_commit=False)
    await consumer.start()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while True:
            offset = await consumer.committed(TopicPartition(topic, 0))
            if offset == expected or loop.time() > deadline:
                return int(offset or 0)
            await asyncio.sleep(0.1)
    finally:
        await consumer.stop()


def test_kf12_a_kafka_subscriber_applies_each_command_once_and_dead_letters_refusals(
    box: inboxguard.Inbox, pg_url: str, kafka_url: str
) -> None:
    """Copies are skipped, a mismatch is quarantined and produced to the
    dead-letter topic, a claim held elsewhere is retried (a copy in the same
    partition) up to max_attempts then quarantined and dead-lettered, and the
    group's committed offset covers every record once they are settled (KF12)."""
    table = payments_table(box.table_prefix)
    group = unique("g")

    async def scenario() -> None:
        topic = await new_topic(kafka_url)
        guard, engine = guard_of(box, pg_url, f"{topic}.dlq")
        broker = KafkaBroker(kafka_url, middlewares=[guard])
        ran: list[str] = []

        @broker.subscriber(topic, group_id=group, ack_policy=AckPolicy.MANUAL, **CONSUMER)
        async def pay(body: dict[str, Any]) -> dict[str, Any]:
            ran.append(body["command_id"])
            await inboxguard.current_session().execute(
                insert(table).values(command_id=body["command_id"], amount=body["amount"])
            )
            return {"applied": body["amount"]}

        guard.check_startup(broker)
        bodies = [{"command_id": f"p-{i}", "amount": i} for i in range(10) for _ in range(2)]
        busy = {"command_id": "busy", "amount": 3}
        async with started(broker):
            for body in [*bodies, {"command_id": "p-1", "amount": 99}]:
                await broker.publish(body, topic=topic, key=body["command_id"].encode())
            await eventually(lambda: len(ran) == 10, "ten payments", timeout=60)

            def send_busy() -> None:
                asyncio.run_coroutine_threadsafe(
                    broker.publish(busy, topic=topic, key=b"busy"), loop
                ).result(10)

            loop = asyncio.get_running_loop()
            await asyncio.to_thread(
                hold_claim_while,
                box.engine,
                box,
                busy,
                send_busy,
                lambda: len(box.quarantined("payments")) == 2,
            )
            dead = await read_topic(kafka_url, f"{topic}.dlq", 2, 30)
            # 21 records, then the busy one and its two retry copies: all committed
            offset = await committed(kafka_url, topic, group, 24)
        await engine.dispose()
        assert sorted(ran) == sorted(f"p-{i}" for i in range(10))
        assert payments(box.engine, box.table_prefix) == (10, 10)
        assert paid(box.engine, box.table_prefix, "p-1") == [1]
        assert paid(box.engine, box.table_prefix, "busy") == []
        assert sorted(d["command_id"] for d in dead) == ["busy", "p-1"]
        assert {"command_id": "p-1", "amount": 99} in dead
        reasons = {r.reason for r in box.quarantined("payments")}
        assert reasons == {QuarantineReason.PAYLOAD_MISMATCH, QuarantineReason.RETRIES_EXHAUSTED}
        assert offset == 24

    asyncio.run(scenario())


@pytest.mark.parametrize("sync", [False, True], ids=["async", "sync"])
def test_kf13_a_batch_subscriber_claims_each_batch_in_one_transaction(
    box: inboxguard.Inbox, pg_url: str, kafka_url: str, sync: bool
) -> None:
    """batch=True: one guard_batch per polled batch (guard_batch_async on the
    async guard, guard_batch on the sync one); the handler applies
    current_batch().fresh; copies across and inside batches are applied once,
    a mismatch is dead-lettered, and the offsets are committed after (KF13)."""
    table = payments_table(box.table_prefix)
    group = unique("g")

    async def scenario() -> None:
        topic = await new_topic(kafka_url)
        guard, engine = guard_of(box, pg_url, f"{topic}.dlq", sync=sync)
        broker = KafkaBroker(kafka_url, middlewares=[guard])
        batches: list[int] = []

        @broker.subscriber(
            topic, group_id=group, ack_policy=AckPolicy.MANUAL, batch=True, **CONSUMER
        )
        async def pay(bodies: list[dict[str, Any]]) -> None:
            batch = current_batch()
            batches.append(len(batch.fresh))
            session = inboxguard.current_session()
            for entry in batch.fresh:
                row = insert(table).values(
                    command_id=entry.command_id, amount=entry.payload["amount"]
                )
                done = session.execute(row)
                if inspect.isawaitable(done):
                    await done
                entry.result = {"applied": entry.payload["amount"]}

        guard.check_startup(broker)
        bodies = [{"command_id": f"p-{i}", "amount": i} for i in range(30)]
        async with started(broker):
            for body in [*bodies, *bodies[:10], {"command_id": "p-3", "amount": 7}]:
                await broker.publish(body, topic=topic)
            await eventually(
                lambda: payments(box.engine, box.table_prefix)[0] == 30, "every payment", 60
            )
            dead = await read_topic(kafka_url, f"{topic}.dlq", 1, 30)
            await eventually(lambda: box.quarantined("payments"), "the mismatch quarantined")
            offset = await committed(kafka_url, topic, group, 41)
        await engine.dispose()
        assert payments(box.engine, box.table_prefix) == (30, 30)
        assert sum(batches) == 30
        assert dead == [{"command_id": "p-3", "amount": 7}]
        [record] = box.quarantined("payments")
        assert record.reason == QuarantineReason.PAYLOAD_MISMATCH
        assert box.lookup("payments", "p-29") is not None
        assert offset == 41

    asyncio.run(scenario())


@pytest.mark.parametrize("policy", [None, AckPolicy.ACK_FIRST, AckPolicy.ACK])
def test_kf14_start_refuses_a_kafka_subscriber_without_manual_ack(
    box: inboxguard.Inbox, pg_url: str, kafka_url: str, policy: AckPolicy | None
) -> None:
    """The Kafka default (ACK_FIRST: auto-commit) and any policy but MANUAL are
    refused at start-up (KF14)."""
    guard, _engine = guard_of(box, pg_url, None)
    broker = KafkaBroker(kafka_url, middlewares=[guard])
    options = {} if policy is None else {"ack_policy": policy}

    @broker.subscriber(unique("t"), group_id="g", **options)
    async def pay(body: Any) -> None: ...

    with pytest.raises(ConfigurationError, match=r"ack_policy=AckPolicy\.MANUAL"):
        guard.check_startup(broker)


def test_kf14_start_takes_the_topic_retention_as_a_replay_window(
    box: inboxguard.Inbox, pg_url: str, kafka_url: str
) -> None:
    """A subscriber resetting to earliest on a topic kept 30 days cannot be
    guarded by evidence kept 7 days; resetting to latest it can (KF14)."""
    topic = asyncio.run(new_topic(kafka_url, retention_ms=30 * 86_400_000))
    for reset, refused in (("earliest", True), ("latest", False)):
        guard, _engine = guard_of(box, pg_url, None)
        broker = KafkaBroker(kafka_url, middlewares=[guard])

        @broker.subscriber(
            topic, group_id="g", ack_policy=AckPolicy.MANUAL, auto_offset_reset=reset
        )
        async def pay(body: Any) -> None: ...

        if refused:
            with pytest.raises(RetentionMisalignedError, match="kafka_topic_retention"):
                guard.check_startup(broker)
        else:
            guard.check_startup(broker)
