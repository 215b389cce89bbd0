"""Partial failure inside one dispatcher: one poison row never takes its batch
down (O14), a lost LISTEN connection is opened again (O15), and arguments that
would never return are refused (O16)."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

import inboxguard
from tests.conftest import FakeClock
from tests.outbox.helpers import Recorder, wait_until

IDS = [f"order.ship:id={n}" for n in range(5)]


class GeventTimeout(BaseException):
    """Stands for gevent's ``Timeout``: a BaseException raised inside a send."""


@pytest.fixture
def box(sqlite_url, prefix):
    engine = create_engine(sqlite_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix, clock=FakeClock())
    outbox.create_schema()
    with Session(engine) as session, session.begin():
        for cid in IDS:
            outbox.add(session, command_id=cid, destination="q", payload={"cid": cid})
    yield outbox
    engine.dispose()


def test_o14_a_base_exception_stops_the_dispatcher_only_after_the_batch_is_settled(box):
    recorder = Recorder()

    def send(message):
        if message.command_id == IDS[1]:
            raise GeventTimeout("send took too long")
        return recorder(message)

    with inboxguard.Dispatcher(box, send, max_attempts=3) as dispatcher:
        with pytest.raises(GeventTimeout):
            dispatcher.run_once()
        assert recorder.ids() == [IDS[0]]
        rows = {cid: box.get(cid) for cid in IDS}
        assert rows[IDS[0]].delivered_at is not None
        assert rows[IDS[1]].attempts == 1
        assert "GeventTimeout: send took too long" in rows[IDS[1]].last_error
        for cid in IDS[2:]:  # never sent: handed back at once, no attempt counted
            assert (rows[cid].attempts, rows[cid].last_error) == (0, None)
        dispatcher.transport = recorder
        assert dispatcher.run_once() == 3
        box.clock.advance(dt.timedelta(minutes=10))
        assert dispatcher.run_once() == 1
    assert sorted(recorder.ids()) == sorted(IDS)
    assert (box.status().dead, box.status().backlog) == (0, 0)


def test_o14_a_receipt_that_cannot_be_encoded_is_still_a_delivery(box):
    sent = []

    def send(message):
        sent.append(message.command_id)
        if message.command_id == IDS[2]:
            return {1: "int key", "a": "str key"}  # sort_keys cannot order these
        return {"ok": True}

    with inboxguard.Dispatcher(box, send) as dispatcher:
        assert dispatcher.run_once() == 5
    assert sent == IDS  # each row sent once
    assert box.status().backlog == 0
    assert "unencodable_receipt" in box.get(IDS[2]).receipt
    assert box.get(IDS[3]).receipt == {"ok": True}


def kill_listener(engine, channel):
    """Terminate the backend that LISTENs on ``channel`` (a restart, for it)."""
    with engine.begin() as conn:
        return conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query = :listen"
            ),
            {"listen": f'LISTEN "{channel}"'},
        ).rowcount


def test_o15_the_wakeup_dispatcher_reopens_its_listen_connection(pg_url, prefix):
    engine = create_engine(pg_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    recorder = Recorder()
    dispatcher = inboxguard.Dispatcher(
        outbox, recorder, poll_interval=dt.timedelta(seconds=120), wakeup=True
    )
    thread = threading.Thread(target=dispatcher.run_forever, daemon=True)
    thread.start()
    try:
        wait_until(lambda: dispatcher.listening, timeout=10)
        assert kill_listener(engine, outbox.channel) == 1
        wait_until(lambda: not dispatcher.listening, timeout=10)
        assert thread.is_alive()
        with Session(engine) as session, session.begin():
            outbox.add(session, command_id="after-restart", destination="q", payload={})
        # Polling alone would wait 120 s: the connection is reopened, and the
        # pass after the reopen claims what was committed meanwhile.
        wait_until(lambda: recorder.ids() == ["after-restart"], timeout=20)
        wait_until(lambda: dispatcher.listening, timeout=10)
        with Session(engine) as session, session.begin():
            outbox.add(session, command_id="woken", destination="q", payload={})
        wait_until(lambda: recorder.ids() == ["after-restart", "woken"], timeout=20)
    finally:
        dispatcher.stop()
        thread.join(10)
        outbox.drop_schema()
        engine.dispose()
    assert not thread.is_alive()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_o16_batch_and_limit_arguments_are_refused(box, bad):
    with pytest.raises(inboxguard.ConfigurationError, match="batch_size must be a positive int"):
        box.compact(batch_size=bad)
    with pytest.raises(inboxguard.ConfigurationError, match="limit must be a positive int"):
        box.dead(limit=bad)
    with pytest.raises(inboxguard.ConfigurationError, match="max_attempts must be a positive"):
        inboxguard.Dispatcher(box, Recorder(), max_attempts=bad)
