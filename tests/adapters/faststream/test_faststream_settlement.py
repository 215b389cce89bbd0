"""The FastStream settlement table (F12-F15): each subscriber setting that
decides an ack is accepted only when the table knows it to be safe, at start
and on the delivery path. The start-up checks read the declarations; the
delivery-path test runs on a real RabbitMQ."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import nats
import pytest
from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.rabbit import RabbitBroker, RabbitQueue
from faststream.redis import RedisBroker, StreamSub
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig
from sqlalchemy import create_engine, make_url
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.faststream import COMMAND_ID_HEADER, InboxMiddleware
from inboxguard.errors import ConfigurationError
from tests.conftest import AMQP_URL, require_service, unique
from tests.outbox._proxy import TcpProxy

from .conftest import NATS_URL
from .support import eventually, started

MAX_ATTEMPTS = 4


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


def _guard(box: inboxguard.Inbox) -> InboxMiddleware:
    return InboxMiddleware(
        box,
        consumer=unique("pay"),
        command_id=None,
        session_factory=sessionmaker(box.engine),
        max_attempts=MAX_ATTEMPTS,
        retry_delay=dt.timedelta(seconds=1),
    )


async def noop(body: Any) -> None:
    return None


def _jetstream(config: ConsumerConfig) -> dict[str, Any]:
    return {
        "subject": "s",
        "stream": JStream("s"),
        "durable": "d",
        "pull_sub": PullSub(),
        "config": config,
    }


@pytest.mark.parametrize(
    ("config", "accepted"),
    [
        (ConsumerConfig(max_deliver=MAX_ATTEMPTS), False),
        (ConsumerConfig(max_deliver=MAX_ATTEMPTS - 1), False),
        (ConsumerConfig(max_deliver=MAX_ATTEMPTS + 1), True),
        (ConsumerConfig(max_deliver=-1), True),
        (ConsumerConfig(), True),
    ],
    ids=["equal", "below", "above", "unlimited", "default"],
)
def test_f12_jetstream_max_deliver_must_exceed_max_attempts(
    box: inboxguard.Inbox, config: ConsumerConfig, accepted: bool
) -> None:
    """``max_deliver == max_attempts`` is refused: the last attempt's nack asks
    for a redelivery the server never makes. The message names the safe values."""
    guard = _guard(box)
    broker = NatsBroker(middlewares=[guard])
    broker.subscriber(**_jetstream(config))(noop)
    if accepted:
        guard.check_startup(broker)
        return
    with pytest.raises(ConfigurationError) as refused:
        guard.check_startup(broker)
    assert "max_deliver" in str(refused.value)
    assert "None, -1, > max_attempts" in str(refused.value)


@pytest.mark.parametrize("policy", [JsAckPolicy.ALL, JsAckPolicy.NONE, "all", "none"])
def test_f13_a_jetstream_consumer_acks_each_message_explicitly(
    box: inboxguard.Inbox, policy: Any
) -> None:
    """``ConsumerConfig(ack_policy=all)`` or ``none`` is refused; only explicit is accepted."""
    guard = _guard(box)
    broker = NatsBroker(middlewares=[guard])
    broker.subscriber(**_jetstream(ConsumerConfig(ack_policy=policy)))(noop)
    with pytest.raises(ConfigurationError, match=r"ConsumerConfig.ack_policy=.*use explicit"):
        guard.check_startup(broker)


def test_f15_a_redis_group_without_a_claiming_subscriber_is_refused(
    box: inboxguard.Inbox,
) -> None:
    """A stream group read with no subscriber that claims idle pending entries:
    a killed worker's entry would stay pending for ever; refused at start."""
    guard = _guard(box)
    broker = RedisBroker(middlewares=[guard])
    broker.subscriber(stream=StreamSub("s", group="g", consumer="c"))(noop)
    with pytest.raises(ConfigurationError, match=r"claiming subscriber=False.*min_idle_time"):
        guard.check_startup(broker)


@pytest.mark.rabbitmq
def test_f14_ack_first_is_refused_on_the_delivery_path_itself(box: inboxguard.Inbox) -> None:
    """``AckPolicy.ACK_FIRST`` without ``check_startup``: the subscriber's
    messages are never run outside the promise; each is quarantined (it was
    acked before the middleware saw it) under the configuration reason."""
    require_service("rabbitmq")
    queue = unique("first")
    guard = _guard(box)
    broker = RabbitBroker(AMQP_URL, middlewares=[guard])
    ran: list[Any] = []

    @broker.subscriber(RabbitQueue(queue, auto_delete=True), ack_policy=AckPolicy.ACK_FIRST)
    async def handle(body: Any) -> None:
        ran.append(body)

    async def scenario() -> None:
        async with started(broker):
            await broker.publish({"n": 1}, queue=queue, headers={COMMAND_ID_HEADER: "c1"})
            await eventually(box.quarantined, "the quarantine record")

    asyncio.run(scenario())
    assert ran == []
    [record] = box.quarantined()
    assert record.reason == "configuration"
    assert "ack_first" in str(record.details)


#: The outage test's retry policy: two attempts one second apart.
OUTAGE_ATTEMPTS = 2


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    url = make_url(pg_url)
    proxy = TcpProxy(url.port or 5432)
    proxy.start()
    yield proxy, url.set(port=proxy.port).render_as_string(hide_password=False)
    proxy.cut()


@pytest.mark.nats
@pytest.mark.postgresql
@pytest.mark.parametrize(
    "max_deliver", [-1, OUTAGE_ATTEMPTS + 4], ids=["unlimited", "above-max-attempts"]
)
def test_f16_a_jetstream_cap_above_max_attempts_outlives_a_database_outage(
    proxied: tuple[TcpProxy, str], prefix: str, max_deliver: int
) -> None:
    """The ``max_deliver`` values the table accepts, under a database outage
    longer than ``max_attempts``: the last attempt cannot be quarantined, its
    ``nack(delay)`` asks for one more delivery and the server makes it; once
    the database is back the command is applied exactly once, not lost and
    not quarantined."""
    require_service("nats")
    proxy, url = proxied
    engine = create_engine(url, pool_pre_ping=True)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    consumer, name = unique("f16"), unique("f16s")
    guard = InboxMiddleware(
        inbox,
        consumer=consumer,
        command_id=None,
        session_factory=sessionmaker(engine),
        max_attempts=OUTAGE_ATTEMPTS,
        retry_delay=dt.timedelta(seconds=1),
    )
    broker = NatsBroker(NATS_URL, middlewares=[guard])
    ran: list[Any] = []
    broker.subscriber(
        subject=name,
        stream=JStream(name, subjects=[name]),
        durable=name,
        pull_sub=PullSub(),
        config=ConsumerConfig(max_deliver=max_deliver),
    )(_recorder(ran))

    async def deliveries() -> int:
        client = await nats.connect(NATS_URL)
        try:
            info = await client.jetstream().consumer_info(name, name)
            return int(info.delivered.consumer_seq or 0)
        finally:
            await client.close()

    async def scenario() -> None:
        async with started(broker):
            guard.check_startup(broker)
            engine.dispose()
            proxy.cut()
            await broker.publish({"n": 1}, subject=name, headers={COMMAND_ID_HEADER: "c-1"})
            deadline = asyncio.get_running_loop().time() + 30
            # Past the last attempt: the outage outlasted the retry policy.
            while await deliveries() <= OUTAGE_ATTEMPTS:
                assert asyncio.get_running_loop().time() < deadline, "no redelivery"
                await asyncio.sleep(0.05)
            proxy.start()
            await eventually(lambda: ran, "the command applied after the outage")
            client = await nats.connect(NATS_URL)
            try:
                await client.jetstream().delete_stream(name)
            finally:
                await client.close()

    asyncio.run(scenario())
    assert ran == [{"n": 1}]
    assert inbox.lookup(consumer, "c-1") is not None
    assert inbox.quarantined() == []
    inbox.drop_schema()
    engine.dispose()


def _recorder(ran: list[Any]) -> Any:
    async def handle(body: Any) -> None:
        ran.append(body)

    return handle


@pytest.mark.rabbitmq
@pytest.mark.parametrize(
    "policy", [AckPolicy.NACK_ON_ERROR, AckPolicy.ACK, AckPolicy.MANUAL], ids=lambda p: p.value
)
def test_f17_every_accepted_ack_policy_retries_a_raising_handler(
    box: inboxguard.Inbox, policy: AckPolicy
) -> None:
    """The subscriber ack policies the table accepts besides the default, on
    a real RabbitMQ: a handler that raises twice is retried by the
    middleware, whatever FastStream would have done with the error, and the
    command is applied on the third attempt, neither lost nor quarantined."""
    require_service("rabbitmq")
    queue, consumer = unique("policy"), unique("pay")
    guard = InboxMiddleware(
        box,
        consumer=consumer,
        command_id=None,
        session_factory=sessionmaker(box.engine),
        max_attempts=MAX_ATTEMPTS,
        retry_delay=dt.timedelta(0),
    )
    broker = RabbitBroker(AMQP_URL, middlewares=[guard])
    attempts: list[int] = []

    @broker.subscriber(RabbitQueue(queue, auto_delete=True), ack_policy=policy)
    async def handle(body: Any) -> None:
        attempts.append(len(attempts) + 1)
        if len(attempts) <= 2:
            raise RuntimeError("the payment service hiccupped")

    async def scenario() -> None:
        async with started(broker):
            guard.check_startup(broker)
            await broker.publish({"n": 1}, queue=queue, headers={COMMAND_ID_HEADER: "c1"})
            await eventually(lambda: box.lookup(consumer, "c1"), "the applied command")

    asyncio.run(scenario())
    assert attempts == [1, 2, 3]
    assert box.quarantined() == []
