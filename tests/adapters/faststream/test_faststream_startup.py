"""What InboxMiddleware refuses before a worker consumes: subscribers that cannot
hold a message until the commit, broker limits below the retry cap, replay
windows longer than the evidence, shared consumer names, missing tables, bad
arguments. The checks read the subscribers' declarations: no broker is needed."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from faststream import AckPolicy, FastStream
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.rabbit import RabbitBroker, RabbitQueue
from faststream.redis import RedisBroker, StreamSub
from nats.js.api import ConsumerConfig
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware, inbox_consumer
from inboxguard.errors import ConfigurationError, RetentionMisalignedError

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


def guard_of(box: inboxguard.Inbox, **options: Any) -> InboxMiddleware:
    return InboxMiddleware(
        box,
        consumer=options.pop("consumer", "pay"),
        command_id=options.pop("command_id", "id"),
        session_factory=sessionmaker(box.engine),
        **options,
    )


async def noop(body: Any) -> None:
    return None


def _reader_and_claimer(broker: Any) -> Any:
    """A Redis stream group read by one subscriber and claimed by another."""
    claim = broker.subscriber(stream=StreamSub("s", group="g", consumer="c2", min_idle_time=60_000))
    read = broker.subscriber(stream=StreamSub("s", group="g", consumer="c"))
    return lambda fn: claim(read(fn))


def test_f8_a_well_declared_subscriber_on_each_broker_starts(box: inboxguard.Inbox) -> None:
    for broker_cls, declare in [
        (RabbitBroker, lambda b: b.subscriber(RabbitQueue("q", durable=True))),
        (RedisBroker, _reader_and_claimer),
        (
            NatsBroker,
            lambda b: b.subscriber("s", stream=JStream("s"), durable="d", pull_sub=PullSub()),
        ),
    ]:
        guard = guard_of(box, consumer=f"pay-{broker_cls.__name__}")
        broker = broker_cls(middlewares=[guard])

        @declare(broker)
        async def handle(body: Any) -> None:
            return None

        guard.check_startup(broker)
        assert guard.checked


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: (RabbitBroker, {"queue": "q", "ack_policy": AckPolicy.ACK_FIRST}),
            "ACK_FIRST",
        ),
        (lambda: (RedisBroker, {"list": "l"}), "Redis lists and Pub/Sub"),
        (lambda: (RedisBroker, {"stream": "s"}), "without a consumer group"),
        (
            lambda: (
                RedisBroker,
                {"stream": StreamSub("s", group="g", consumer="c", no_ack=True)},
            ),
            "no_ack",
        ),
        (lambda: (NatsBroker, {"subject": "core"}), "core NATS"),
        (
            lambda: (
                NatsBroker,
                {
                    "subject": "s",
                    "stream": JStream("s"),
                    "durable": "d",
                    "pull_sub": PullSub(),
                    "config": ConsumerConfig(max_deliver=2),
                },
            ),
            "max_deliver=2",
        ),
    ],
    ids=["ack-first", "redis-list", "redis-no-group", "redis-no-ack", "core-nats", "max-deliver"],
)
def test_f8_a_subscriber_that_cannot_keep_the_guarantees_is_refused(
    box: inboxguard.Inbox, make: Any, match: str
) -> None:
    broker_cls, options = make()
    guard = guard_of(box)
    broker = broker_cls(middlewares=[guard])
    broker.subscriber(**options)(noop)
    with pytest.raises(ConfigurationError, match=match):
        guard.check_startup(broker)
    assert not guard.checked


@pytest.mark.parametrize(
    ("broker_cls", "declare", "window"),
    [
        (
            RabbitBroker,
            lambda b: b.subscriber(RabbitQueue("q", arguments={"x-message-ttl": 2 * DAY_MS})),
            "queue_message_ttl",
        ),
        (
            RedisBroker,
            lambda b: b.subscriber(
                stream=StreamSub("s", group="g", consumer="c", min_idle_time=2 * DAY_MS)
            ),
            "redis_claim_idle",
        ),
        (
            NatsBroker,
            lambda b: b.subscriber(
                "s",
                stream=JStream("s"),
                durable="d",
                pull_sub=PullSub(),
                config=ConsumerConfig(ack_wait=2 * 86400),
            ),
            "jetstream_ack_wait",
        ),
        (
            NatsBroker,
            lambda b: b.subscriber(
                "s", stream=JStream("s", max_age=2 * 86400), durable="d", pull_sub=PullSub()
            ),
            "jetstream_max_age",
        ),
    ],
    ids=["rabbit-ttl", "redis-idle", "nats-ack-wait", "nats-max-age"],
)
def test_f9_a_broker_window_longer_than_the_evidence_refuses_to_start(
    box: inboxguard.Inbox, broker_cls: Any, declare: Any, window: str
) -> None:
    guard = guard_of(box)
    broker = broker_cls(middlewares=[guard])
    declare(broker)(noop)
    with pytest.raises(RetentionMisalignedError, match=window) as caught:
        guard.check_startup(broker)
    assert caught.value.window == window


def test_f9_declared_windows_and_the_retry_schedule_are_checked_too(
    box: inboxguard.Inbox,
) -> None:
    guard = guard_of(box, windows={"dead_letter_replay": dt.timedelta(days=3)})
    broker = RabbitBroker(middlewares=[guard])
    broker.subscriber("q")(noop)
    with pytest.raises(RetentionMisalignedError, match="dead_letter_replay"):
        guard.check_startup(broker)
    slow = guard_of(box, consumer="slow", max_attempts=3, retry_delay=dt.timedelta(hours=13))
    broker = RabbitBroker(middlewares=[slow])
    broker.subscriber("q")(noop)
    with pytest.raises(RetentionMisalignedError, match="retry_schedule"):
        slow.check_startup(broker)


def test_f9_the_application_does_not_start_when_a_check_fails(box: inboxguard.Inbox) -> None:
    guard = guard_of(box, windows={"dead_letter_replay": dt.timedelta(days=3)})
    broker = RabbitBroker("amqp://guest:guest@127.0.0.1:1//", middlewares=[guard])
    broker.subscriber("q")(noop)
    app = FastStream(broker, on_startup=[lambda: guard.check_startup(broker)])
    with pytest.raises(RetentionMisalignedError):
        asyncio.run(app.start())


def test_f10_two_handlers_may_not_share_a_consumer_by_accident(box: inboxguard.Inbox) -> None:
    guard = guard_of(box)
    broker = RabbitBroker(middlewares=[guard])

    @broker.subscriber("a")
    async def first(body: Any) -> None:
        return None

    @broker.subscriber("b")
    async def second(body: Any) -> None:
        return None

    with pytest.raises(ConfigurationError, match="already used by"):
        guard.check_startup(broker)

    guard = guard_of(box, consumer="other")
    broker = RabbitBroker(middlewares=[guard])
    broker.subscriber("a")(first)

    @broker.subscriber("b")
    @inbox_consumer("orders.second")
    async def third(body: Any) -> None:
        return None

    guard.check_startup(broker)


def test_f10_missing_tables_refuse_to_start(sqlite_url: str) -> None:
    inbox = inboxguard.Inbox(create_engine(sqlite_url), retention=dt.timedelta(days=1))
    guard = guard_of(inbox)
    broker = RabbitBroker(middlewares=[guard])
    broker.subscriber("q")(noop)
    with pytest.raises(ConfigurationError, match="create_schema"):
        guard.check_startup(broker)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"session_factory": None}, "exactly one of session_factory"),
        ({"async_session_factory": lambda: None}, "exactly one of session_factory"),
        ({"consumer": 3}, "consumer must be a declared name"),
        ({"consumer": " pay"}, "consumer ' pay' is not usable"),
        ({"command_id": 7}, "command_id must be the name of a body field"),
        ({"command_id": lambda body: body["id"]}, r"\(body, headers\)"),
        ({"exclude": [1]}, "exclude must be payload key names"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"windows": {"x": 3}}, "windows must map"),
        ({"require_sent_at": "yes"}, "require_sent_at"),
    ],
)
def test_f10_bad_arguments_name_the_field(
    box: inboxguard.Inbox, options: dict[str, Any], match: str
) -> None:
    base: dict[str, Any] = {
        "consumer": "pay",
        "command_id": "id",
        "session_factory": sessionmaker(box.engine),
    }
    with pytest.raises(ConfigurationError, match=match):
        InboxMiddleware(box, **{**base, **options})
    with pytest.raises(ConfigurationError, match="consumer must be a declared name"):
        inbox_consumer(None)  # type: ignore[arg-type]


def test_f5_the_transport_refuses_what_cannot_confirm() -> None:
    from faststream.nats import NatsBroker as Nats

    from inboxguard.adapters.faststream.transport import FastStreamTransport

    with pytest.raises(ConfigurationError, match="stream="):
        FastStreamTransport(Nats())
    with pytest.raises(ConfigurationError, match="NATS JetStream only"):
        FastStreamTransport(RabbitBroker(), stream="s")
    with pytest.raises(ConfigurationError, match="RabbitBroker, RedisBroker or NatsBroker"):
        FastStreamTransport(object())


def test_f11_the_documented_example_runs() -> None:
    """docs/examples/faststream_middleware.py runs standalone and exits 0."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "docs/examples/faststream_middleware.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "charged once" in done.stdout


def test_the_public_names_are_exported_and_documented() -> None:
    import inboxguard.adapters.faststream as adapter
    from inboxguard.adapters.faststream import transport

    for module in (adapter, transport):
        for name in module.__all__:
            value = getattr(module, name)
            if callable(value):
                assert (value.__doc__ or "").strip(), f"{module.__name__}.{name} has no docstring"
    assert {"InboxMiddleware", "SentAtMiddleware", "inbox_consumer"} <= set(adapter.__all__)
    assert transport.__all__ == ["FastStreamTransport"]
