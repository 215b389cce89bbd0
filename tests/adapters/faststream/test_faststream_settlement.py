"""The FastStream settlement table (F12-F15): each subscriber setting that
decides an ack is accepted only when the table knows it to be safe, at start
and on the delivery path. The start-up checks read the declarations; the
delivery-path test runs on a real RabbitMQ."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.rabbit import RabbitBroker, RabbitQueue
from faststream.redis import RedisBroker, StreamSub
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.faststream import COMMAND_ID_HEADER, InboxMiddleware
from inboxguard.errors import ConfigurationError
from tests.conftest import AMQP_URL, require_service, unique

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
