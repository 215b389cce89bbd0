"""GuardedConsumer in the test's own event loop against tansu and PostgreSQL:
where the command ID comes from, and what start() refuses."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard.adapters.kafka import GuardedConsumer
from inboxguard.adapters.kafka.transport import KafkaTransport
from inboxguard.errors import ConfigurationError, RetentionMisalignedError
from integrations.payments import async_url
from tests.adapters.kafka.tansu import CONSUMER
from tests.conftest import unique

pytestmark = [pytest.mark.postgresql]


@pytest.fixture
def inbox(pg_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(pg_url)
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix=prefix)
    box.create_schema()
    yield box
    box.drop_schema()
    engine.dispose()


async def topic(url: str, retention_ms: int | None = 3_600_000, partitions: int = 1) -> str:
    name = unique("topic")
    admin = AIOKafkaAdminClient(bootstrap_servers=url)
    await admin.start()
    configs = {} if retention_ms is None else {"retention.ms": str(retention_ms)}
    try:
        await admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, topic_configs=configs)]
        )
    finally:
        await admin.close()
    return name


async def produce(url: str, name: str, *records: tuple[bytes | None, Any, dict[str, str]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=url, acks="all")
    await producer.start()
    try:
        for key, value, headers in records:
            await producer.send_and_wait(
                name,
                json.dumps(value).encode(),
                key=key,
                headers=[(k, v.encode()) for k, v in headers.items()],
            )
    finally:
        await producer.stop()


def consumer(url: str, **options: Any) -> AIOKafkaConsumer:
    settings = {"group_id": unique("g"), "enable_auto_commit": False, **CONSUMER, **options}
    return AIOKafkaConsumer(bootstrap_servers=url, **settings)


@asynccontextmanager
async def guarded(
    url: str, inbox: inboxguard.Inbox, pg_url: str, topics: list[str], **options: Any
) -> AsyncIterator[GuardedConsumer]:
    engine = create_async_engine(async_url(pg_url))
    kafka = consumer(url)
    guard = GuardedConsumer(
        kafka,
        inbox,
        name=unique("c"),
        topics=topics,
        session_factory=async_sessionmaker(engine),
        retry_delay=dt.timedelta(milliseconds=50),
        **options,
    )
    try:
        yield guard
    finally:
        await kafka.stop()
        await engine.dispose()


async def until(predicate: Callable[[], object], what: str, timeout: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def test_kf8_the_command_id_is_the_outbox_header_never_the_key(
    kafka_url: str, inbox: inboxguard.Inbox, pg_url: str
) -> None:
    """By default the command ID is the x-inbox-command-id header: two commands
    about one entity (one key) are both applied; a record without the header
    is quarantined as invalid_command, never applied under its key (KF8)."""

    async def main() -> list[str]:
        name = await topic(kafka_url)
        await produce(
            kafka_url,
            name,
            (b"acct-1", {"n": 1}, {"x-inbox-command-id": "c-1"}),
            (b"acct-1", {"n": 2}, {"x-inbox-command-id": "c-2"}),
            (b"acct-1", {"n": 3}, {}),
            (b"acct-1", {"n": 1}, {"x-inbox-command-id": "c-1"}),
        )
        applied: list[str] = []

        async def handler(body: Any, record: Any) -> None:
            applied.append(dict(record.headers)["x-inbox-command-id"].decode())

        async with guarded(kafka_url, inbox, pg_url, [name]) as guard:
            await guard.start()
            task = asyncio.create_task(guard.run(handler))
            await until(lambda: len(inbox.quarantined(guard.name)) == 1, "the quarantine")
            await until(lambda: inbox.lookup(guard.name, "c-2") is not None, "c-2")
            guard.stop()
            await task
            [record] = inbox.quarantined(guard.name)
            assert record.reason == "invalid_command"
        return applied

    assert asyncio.run(main()) == ["c-1", "c-2"]


def test_kf8_a_callable_over_the_record_names_the_command(
    kafka_url: str, inbox: inboxguard.Inbox, pg_url: str
) -> None:
    """command_id= may be a callable over the whole ConsumerRecord (KF8)."""

    async def main() -> list[Any]:
        name = await topic(kafka_url)
        await produce(
            kafka_url, name, (b"k", {"n": 1}, {}), (b"k", {"n": 1}, {}), (b"k", {"n": 2}, {})
        )
        applied: list[Any] = []

        async def handler(body: Any, record: Any) -> None:
            applied.append(body["n"])

        def cid(record: Any) -> str:
            return f"{record.topic}:{json.loads(record.value)['n']}"

        async with guarded(kafka_url, inbox, pg_url, [name], command_id=cid) as guard:
            await guard.start()
            task = asyncio.create_task(guard.run(handler))
            await until(lambda: inbox.lookup(guard.name, f"{name}:2") is not None, "n=2")
            guard.stop()
            await task
        return applied

    assert asyncio.run(main()) == [1, 2]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"enable_auto_commit": True}, "enable_auto_commit=True"),
        ({"group_id": None}, "no group_id"),
    ],
)
def test_kf9_start_refuses_offsets_committed_before_the_transaction(
    kafka_url: str, inbox: inboxguard.Inbox, pg_url: str, options: dict[str, Any], match: str
) -> None:
    """Auto-commit (offsets committed on a timer) and a consumer without a group
    are refused at start, before anything is consumed (KF9)."""

    async def main() -> None:
        engine = create_async_engine(async_url(pg_url))
        guard = GuardedConsumer(
            consumer(kafka_url, **options),
            inbox,
            name=unique("c"),
            topics=["t"],
            session_factory=async_sessionmaker(engine),
        )
        try:
            with pytest.raises(ConfigurationError, match=match):
                await guard.start()
        finally:
            await engine.dispose()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("retention_ms", "reset", "refused"),
    [
        (30 * 86_400_000, "earliest", True),
        (None, "earliest", False),  # no retention.ms: Kafka's default 7 days, the evidence's
        (-1, "earliest", True),
        (30 * 86_400_000, "latest", False),
    ],
)
def test_kf10_the_topic_retention_is_a_replay_window_of_a_group_resetting_to_earliest(
    kafka_url: str,
    inbox: inboxguard.Inbox,
    pg_url: str,
    retention_ms: int | None,
    reset: str,
    refused: bool,
) -> None:
    """start() reads each topic's retention.ms from the broker, before the
    consumer joins its group; with auto_offset_reset='earliest' it must fit in
    the evidence horizon (KF10). A one-hour topic passes in the e2e tests."""

    async def main() -> None:
        name = await topic(kafka_url, retention_ms)
        engine = create_async_engine(async_url(pg_url))
        kafka = consumer(kafka_url, auto_offset_reset=reset)
        guard = GuardedConsumer(
            kafka,
            inbox,
            name=unique("c"),
            topics=[name],
            session_factory=async_sessionmaker(engine),
        )
        try:
            if refused:
                with pytest.raises(RetentionMisalignedError, match="kafka_topic_retention"):
                    await guard.start()
            else:
                await guard.start()
                await kafka.stop()
        finally:
            await engine.dispose()

    asyncio.run(main())


def test_kf11_the_outbox_transport_refuses_anything_but_acks_all() -> None:
    """A row is delivered only once every in-sync replica has it (KF11)."""
    with pytest.raises(ConfigurationError, match="acks='all'"):
        KafkaTransport("127.0.0.1:9092", producer_options={"acks": 1})
    KafkaTransport("127.0.0.1:9092", producer_options={"acks": "all"}).close()
