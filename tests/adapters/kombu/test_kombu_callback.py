"""The kombu callback on kombu's in-memory transport (no broker): what a failed
ack and an unusable message do. SQLite holds the inbox."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine, insert
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import ATTEMPT_HEADER, SENT_AT_HEADER, guarded
from integrations.payments import payments_table
from tests.adapters.generic_support import paid


@pytest.fixture
def box(sqlite_url: str, prefix: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    payments_table(prefix).metadata.create_all(engine)
    yield inbox
    engine.dispose()


def consume_one(conn: Connection, queue: Queue, callback: Any) -> None:
    with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
        conn.drain_events(timeout=5)


def make_callback(box: inboxguard.Inbox, seen: list[str]) -> Any:
    table = payments_table(box.table_prefix)

    def handler(body: dict[str, Any], message: Message) -> None:
        seen.append(body["command_id"])
        inboxguard.current_session().execute(
            insert(table).values(command_id=body["command_id"], amount=body["amount"])
        )

    return guarded(
        handler,
        box,
        session_factory=sessionmaker(box.engine),
        command_id="command_id",
        consumer="payments",
    )


def test_a_failed_ack_after_commit_is_logged_and_the_redelivery_is_a_duplicate(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []
    callback = make_callback(box, seen)
    queue = Queue("pay-ack")
    body = {"command_id": "p1", "amount": 4}

    def ack_fails(body: Any, message: Message) -> None:
        def broken_ack() -> None:
            raise ConnectionResetError("connection lost before the ack")

        message.ack = broken_ack  # type: ignore[method-assign]
        callback(body, message)

    with Connection("memory://") as conn:
        Producer(conn).publish(body, routing_key="pay-ack", declare=[queue], serializer="json")
        with caplog.at_level(logging.WARNING, logger="inboxguard.kombu"):
            consume_one(conn, queue, ack_fails)
        # the broker never saw the ack: it delivers the message again
        Producer(conn).publish(body, routing_key="pay-ack", declare=[queue], serializer="json")
        consume_one(conn, queue, callback)
    assert "failed after its commit" in caplog.text
    assert seen == ["p1"]
    assert paid(box.engine, box.table_prefix, "p1") == [4]


def test_a_message_without_a_command_id_is_quarantined_logged_and_rejected(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []
    callback = make_callback(box, seen)
    queue = Queue("pay-bad")
    outcome: list[bool] = []

    def observe(body: Any, message: Message) -> None:
        callback(body, message)
        outcome.append(message.acknowledged)

    with Connection("memory://") as conn:
        Producer(conn).publish(
            {"amount": 4}, routing_key="pay-bad", declare=[queue], serializer="json"
        )
        with caplog.at_level(logging.ERROR, logger="inboxguard.kombu"):
            consume_one(conn, queue, observe)
    assert outcome == [True]
    assert "'command_id' key" in caplog.text
    assert "'amount': 4" in caplog.text
    assert seen == []
    # Changed by issue 20: the refusal is held by a quarantine record, filed under
    # the message (it has no command ID), before the message is rejected.
    [record] = box.quarantined()
    assert record.reason == "invalid_command"
    assert record.command_id.startswith("message:")
    assert record.details["body"] == {"amount": 4}


def test_a_failed_attempt_is_retried_by_a_copy_and_applied_once(box: inboxguard.Inbox) -> None:
    """The handler fails once (a lost connection, say): the original is acked, a copy
    with the next attempt number is published, and the copy applies the command."""
    table = payments_table(box.table_prefix)
    attempts: list[int] = []

    def flaky(body: dict[str, Any], message: Message) -> None:
        attempts.append(int(message.headers.get(ATTEMPT_HEADER, 1)))
        inboxguard.current_session().execute(
            insert(table).values(command_id=body["command_id"], amount=body["amount"])
        )
        if len(attempts) == 1:
            raise ConnectionResetError("database connection lost mid-transaction")

    callback = guarded(
        flaky,
        box,
        session_factory=sessionmaker(box.engine),
        command_id="command_id",
        consumer="payments",
        retry_delay=dt.timedelta(0),
    )
    queue = Queue("pay-retry")
    with Connection("memory://") as conn:
        Producer(conn).publish(
            {"command_id": "r1", "amount": 9}, routing_key="pay-retry", declare=[queue]
        )
        consume_one(conn, queue, callback)
        consume_one(conn, queue, callback)
        assert queue(conn.default_channel).get() is None
    assert attempts == [1, 2]
    assert paid(box.engine, box.table_prefix, "r1") == [9]
    assert box.quarantined() == []


def test_a_message_older_than_the_horizon_is_refused(box: inboxguard.Inbox) -> None:
    """A sent-at header older than the horizon: quarantined, the handler not run."""
    seen: list[str] = []
    callback = make_callback(box, seen)
    queue = Queue("pay-old")
    sent = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).isoformat()
    with Connection("memory://") as conn:
        Producer(conn).publish(
            {"command_id": "old", "amount": 1},
            routing_key="pay-old",
            declare=[queue],
            serializer="json",
            headers={SENT_AT_HEADER: sent},
        )
        consume_one(conn, queue, callback)
    assert seen == []
    assert [r.reason for r in box.quarantined("payments")] == ["beyond_retention"]
    assert paid(box.engine, box.table_prefix, "old") == []


def test_a_refusal_whose_record_cannot_be_written_is_requeued_not_rejected(
    box: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    """The quarantine table cannot be written: the message without a command ID
    is not rejected (which would drop it with no record) but republished as the
    same attempt and acked, logged at ERROR; once the table is back, the copy is
    quarantined and rejected (issue 20, K8)."""
    table = box.tables.quarantine.name
    queue = Queue("pay-unwritable")
    callback = make_callback(box, [])
    with Connection("memory://") as conn:
        Producer(conn).publish({"amount": 4}, routing_key="pay-unwritable", declare=[queue])
        with box.engine.begin() as db:
            db.exec_driver_sql(f'ALTER TABLE "{table}" RENAME TO "{table}_away"')
        with caplog.at_level(logging.ERROR, logger="inboxguard.kombu"):
            consume_one(conn, queue, callback)
        assert "goes back to the broker" in caplog.text
        copy = queue(conn.default_channel).get()
        assert copy is not None
        assert copy.headers[ATTEMPT_HEADER] == 1  # the same attempt, not the next one
        copy.requeue()
        with box.engine.begin() as db:
            db.exec_driver_sql(f'ALTER TABLE "{table}_away" RENAME TO "{table}"')
        consume_one(conn, queue, callback)
        assert queue(conn.default_channel).get() is None
    [record] = box.quarantined()
    assert record.reason == "invalid_command"
