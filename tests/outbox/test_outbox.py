"""The outbox on every database: rows commit with the business change,
IDs are stable, payloads are checked, operators see the backlog (O1-O3, O8, O9)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.outbox import CompactionResult, OutboxStatus


@pytest.fixture
def orders(engine: Engine, prefix: str):
    meta = MetaData()
    table = Table(
        f"{prefix}orders",
        meta,
        Column("id", Integer, primary_key=True),
        Column("state", String(20)),
    )
    meta.create_all(engine)
    yield table
    meta.drop_all(engine)


def test_o1_row_commits_only_with_the_business_change(engine, outbox, orders):
    with pytest.raises(RuntimeError), Session(engine) as session, session.begin():
        session.execute(orders.insert().values(id=1, state="placed"))
        outbox.add(session, command_id="ship:1", destination="ship", payload={"order": 1})
        raise RuntimeError("the business transaction fails")
    assert outbox.status().backlog == 0
    assert outbox.get("ship:1") is None

    with Session(engine) as session, session.begin():
        session.execute(orders.insert().values(id=1, state="placed"))
        assert outbox.add(session, command_id="ship:1", destination="ship", payload={"order": 1})
    row = outbox.get("ship:1")
    assert row is not None
    assert row.digest == inboxguard.digest_of({"order": 1})
    assert row.payload == {"order": 1}
    assert row.delivered_at is None
    with engine.connect() as conn:
        assert conn.execute(select(orders.c.state)).scalar_one() == "placed"


def test_o2_same_id_same_payload_is_a_no_op(engine, outbox):
    cid = inboxguard.command_id_for("order.ship", order_id=7)
    for _ in range(2):
        with Session(engine) as session, session.begin():
            outbox.add(session, command_id=cid, destination="ship", payload={"order": 7, "x": [1]})
    with Session(engine) as session, session.begin():
        # Key order never changes a digest.
        again = outbox.add(
            session, command_id=cid, destination="ship", payload={"x": [1], "order": 7}
        )
        assert again is False
    assert outbox.status().backlog == 1


def test_o2_same_id_other_payload_fails_closed(engine, outbox):
    with Session(engine) as session, session.begin():
        outbox.add(session, command_id="c-1", destination="ship", payload={"amount": 10})
    with pytest.raises(inboxguard.OutboxPayloadConflictError) as caught, Session(engine) as session:
        with session.begin():
            outbox.add(session, command_id="c-1", destination="ship", payload={"amount": 11})
    assert caught.value.stored_digest == inboxguard.digest_of({"amount": 10})
    assert caught.value.incoming_digest == inboxguard.digest_of({"amount": 11})
    assert (caught.value.command_id, caught.value.consumer) == ("c-1", None)
    assert not caught.value.quarantined
    assert not isinstance(caught.value, inboxguard.PayloadMismatchError)
    assert "already in the outbox" in str(caught.value)
    row = outbox.get("c-1")
    assert row is not None
    assert row.payload == {"amount": 10}


def test_o2_text_and_a_number_with_the_same_spelling_conflict(engine, outbox):
    """A row added with the text "1" and the same command added with the number
    Decimal("1") are two payloads: one digest form, no second one beside it."""
    with Session(engine) as session, session.begin():
        outbox.add(session, command_id="c-1", destination="ship", payload={"amount": "1"})
    with pytest.raises(inboxguard.OutboxPayloadConflictError), Session(engine) as session:
        with session.begin():
            outbox.add(
                session, command_id="c-1", destination="ship", payload={"amount": Decimal("1")}
            )
    with Session(engine) as session, session.begin():
        assert (
            outbox.add(session, command_id="c-1", destination="ship", payload={"amount": "1"})
            is False
        )
    assert outbox.status().backlog == 1


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"command_id": ""}, inboxguard.InvalidCommandError, "command_id"),
        ({"command_id": 5}, inboxguard.InvalidCommandError, "command_id"),
        ({"destination": " ship"}, inboxguard.InvalidCommandError, "destination"),
        ({"payload": {"when": dt.datetime(2026, 1, 1)}}, inboxguard.PayloadEncodingError, "when"),
        ({"headers": {"x-inbox-digest": "x"}}, inboxguard.PayloadEncodingError, "x-inbox-digest"),
        ({"headers": ["a"]}, inboxguard.PayloadEncodingError, "mapping"),
    ],
)
def test_o3_bad_input_is_refused_and_writes_nothing(engine, outbox, kwargs, error, words):
    args = {"command_id": "c-1", "destination": "ship", "payload": {"a": 1}, **kwargs}
    with pytest.raises(error, match=words), Session(engine) as session, session.begin():
        outbox.add(session, **args)
    assert outbox.status().backlog == 0


def test_o3_autocommit_connection_is_refused(engine, outbox):
    with engine.connect() as conn:
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(inboxguard.ConfigurationError, match="AUTOCOMMIT"):
            outbox.add(auto, command_id="c", destination="d", payload={})


def test_o8_status_reports_backlog_age_and_dead(engine, outbox, clock, recorder):
    assert outbox.status() == OutboxStatus(0, dt.timedelta(0), 0, 0)
    with Session(engine) as session, session.begin():
        outbox.add(session, command_id="a", destination="d", payload={"n": 1})
    clock.advance(dt.timedelta(seconds=30))
    with Session(engine) as session, session.begin():
        outbox.add(session, command_id="b", destination="d", payload={"n": 2})
    clock.advance(dt.timedelta(seconds=15))
    status = outbox.status()
    assert (status.backlog, status.oldest_unsent_age, status.dead) == (
        2,
        dt.timedelta(seconds=45),
        0,
    )

    recorder.fail_for = {"b"}
    with inboxguard.Dispatcher(outbox, recorder, max_attempts=1) as dispatcher:
        assert dispatcher.run_once() == 1
    status = outbox.status()
    assert (status.backlog, status.oldest_unsent_age, status.dead, status.delivered) == (
        0,
        dt.timedelta(0),
        1,
        1,
    )


def test_o9_compaction_keeps_the_evidence_until_the_horizon(engine, prefix, clock, recorder):
    box = inboxguard.Outbox(
        engine,
        table_prefix=prefix,
        clock=clock,
        retention=dt.timedelta(days=10),
        delivered_retention=dt.timedelta(days=1),
    )
    box.create_schema()
    try:
        with Session(engine) as session, session.begin():
            box.add(session, command_id="sent", destination="d", payload={"n": 1})
            box.add(session, command_id="stuck", destination="d", payload={"n": 2})
        recorder.fail_for = {"stuck"}
        with inboxguard.Dispatcher(box, recorder, max_attempts=1) as dispatcher:
            dispatcher.run_once()
        with Session(engine) as session, session.begin():
            box.add(session, command_id="pending", destination="d", payload={"n": 3})

        clock.advance(dt.timedelta(days=2))
        assert box.compact(batch_size=1) == CompactionResult(compacted=1, purged=0)
        row = box.get("sent")
        assert row is not None
        assert (row.payload, row.receipt, row.digest) == (
            None,
            None,
            inboxguard.digest_of({"n": 1}),
        )
        # The evidence still deduplicates and still detects a changed payload.
        with Session(engine) as session, session.begin():
            assert box.add(session, command_id="sent", destination="d", payload={"n": 1}) is False
        with pytest.raises(inboxguard.OutboxPayloadConflictError), Session(engine) as session:
            with session.begin():
                box.add(session, command_id="sent", destination="d", payload={"n": 9})

        clock.advance(dt.timedelta(days=8, seconds=1))
        assert box.compact() == CompactionResult(compacted=0, purged=1)
        assert box.get("sent") is None
        # Pending and dead rows are never compacted nor purged.
        assert box.get("pending").payload == {"n": 3}
        assert box.get("stuck").payload == {"n": 2}
    finally:
        box.drop_schema()


def test_o9_delivered_retention_cannot_outlive_the_horizon(engine, prefix):
    with pytest.raises(inboxguard.ConfigurationError, match="delivered_retention"):
        inboxguard.Outbox(
            engine,
            table_prefix=prefix,
            retention=dt.timedelta(days=1),
            delivered_retention=dt.timedelta(days=2),
        )


def test_o9_compaction_works_in_bounded_batches(engine, outbox, clock, recorder):
    with Session(engine) as session, session.begin():
        for n in range(5):
            outbox.add(session, command_id=f"c{n}", destination="d", payload={"n": n})
    with inboxguard.Dispatcher(outbox, recorder) as dispatcher:
        assert dispatcher.run_once() == 5
    clock.advance(dt.timedelta(days=2))
    assert outbox.compact(batch_size=2) == CompactionResult(compacted=5, purged=0)
    clock.advance(dt.timedelta(days=40))
    assert outbox.compact(batch_size=2) == CompactionResult(compacted=0, purged=5)
    assert outbox.status().delivered == 0
