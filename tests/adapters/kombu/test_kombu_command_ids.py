"""Where a guarded kombu consumer takes the command ID and what it does without a
sent time (issue 19), on kombu's in-memory transport with SQLite."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import COMMAND_ID_HEADER, SENT_AT_HEADER, from_message, guarded
from inboxguard.errors import ConfigurationError

NOW = dt.datetime.now(dt.UTC).isoformat()


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    yield inbox
    engine.dispose()


def deliver(box: inboxguard.Inbox, body: Any, headers: dict[str, Any], **options: Any) -> list[Any]:
    """Publish one message, consume it through ``guarded``; return the bodies
    the handler ran with (empty when the message was refused)."""
    seen: list[Any] = []
    props = options.pop("props", {})

    def handler(body: Any, message: Message) -> None:
        seen.append(body)

    callback = guarded(
        handler,
        box,
        session_factory=sessionmaker(box.engine),
        consumer=options.pop("consumer", "orders"),
        **options,
    )
    queue = Queue("ids")
    with Connection("memory://") as conn:
        Producer(conn).publish(
            body, routing_key="ids", declare=[queue], serializer="json", headers=headers, **props
        )
        with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
            conn.drain_events(timeout=5)
    return seen


def test_the_outbox_command_id_header_is_the_default(box: inboxguard.Inbox) -> None:
    deliver(box, {"n": 1}, {COMMAND_ID_HEADER: "order-7", SENT_AT_HEADER: NOW})
    assert box.lookup("orders", "order-7") is not None


def test_an_explicit_command_id_wins_over_the_header(box: inboxguard.Inbox) -> None:
    headers = {COMMAND_ID_HEADER: "from-header", SENT_AT_HEADER: NOW}
    deliver(box, {"id": "from-body"}, headers, command_id="id")
    assert box.lookup("orders", "from-body") is not None
    assert box.lookup("orders", "from-header") is None


def test_a_callable_over_the_whole_message_sees_headers_and_properties(
    box: inboxguard.Inbox,
) -> None:
    headers = {"tenant": "acme", SENT_AT_HEADER: NOW}

    def over_message(d: Any) -> str:
        return f"{d.headers['tenant']}-{d.body['n']}-{d.properties['correlation_id']}"

    props = {"correlation_id": "c9"}
    deliver(box, {"n": 3}, headers, command_id=from_message(over_message), props=props)
    assert box.lookup("orders", "acme-3-c9") is not None
    # the old forms still work: a callable over the body
    deliver(box, {"n": 4}, headers, command_id=lambda body: f"b-{body['n']}", consumer="o2")
    assert box.lookup("o2", "b-4") is not None


def test_without_the_header_or_a_command_id_the_message_is_refused(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="inboxguard.kombu"):
        assert deliver(box, {"n": 1}, {SENT_AT_HEADER: NOW}) == []
    [record] = box.quarantined("orders")
    assert record.reason == "invalid_command"
    assert COMMAND_ID_HEADER in caplog.text
    with pytest.raises(ConfigurationError, match="from_message"):
        guarded(lambda b, m: None, box, session_factory=sessionmaker(), consumer="x", command_id=3)  # type: ignore[arg-type]


def test_a_missing_sent_time_is_logged_once_per_consumer(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="inboxguard.kombu"):
        assert deliver(box, {"n": 1}, {COMMAND_ID_HEADER: "c1"}) == [{"n": 1}]
    assert "consumer 'orders' received a message with no sent time" in caplog.text
    assert "require_sent_at=True" in caplog.text
    assert box.lookup("orders", "c1") is not None


def test_require_sent_at_refuses_a_message_without_one(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="inboxguard.kombu"):
        seen = deliver(box, {"n": 1}, {COMMAND_ID_HEADER: "c1"}, require_sent_at=True)
    assert seen == []
    [record] = box.quarantined("orders")
    assert (record.command_id, record.reason) == ("c1", "missing_sent_at")
    assert box.lookup("orders", "c1") is None
    # a stamped message passes
    deliver(box, {"n": 2}, {COMMAND_ID_HEADER: "c2", SENT_AT_HEADER: NOW}, require_sent_at=True)
    assert box.lookup("orders", "c2") is not None
