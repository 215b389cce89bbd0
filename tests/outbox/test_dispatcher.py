"""The dispatcher on every database: delivery under the command ID, durable
receipts, per-row backoff, dead rows, resend after a crash, leases (O4-O7)."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.outbox import HEADER_COMMAND_ID, HEADER_DIGEST, HEADER_SENT_AT, CompactionResult
from tests.outbox.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def add(engine: Engine, outbox: inboxguard.Outbox, *ids: str, headers=None) -> None:
    with Session(engine) as session, session.begin():
        for cid in ids:
            outbox.add(
                session, command_id=cid, destination="billing", payload={"id": cid}, headers=headers
            )


def test_o4_sends_with_command_id_and_digest_then_records_receipt(engine, outbox, recorder, clock):
    add(engine, outbox, "a", "b", headers={"tenant": "t1"})
    with inboxguard.Dispatcher(outbox, recorder) as dispatcher:
        assert dispatcher.run_once() == 2
        assert dispatcher.run_once() == 0
    assert recorder.ids() == ["a", "b"]
    sent = recorder.sent[0]
    assert sent.destination == "billing"
    assert sent.payload == {"id": "a"}
    assert sent.digest == inboxguard.digest_of({"id": "a"})
    assert sent.headers == {
        "tenant": "t1",
        HEADER_COMMAND_ID: "a",
        HEADER_DIGEST: sent.digest,
        HEADER_SENT_AT: clock.now.isoformat(),
    }
    row = outbox.get("a")
    assert row.delivered_at == clock.now
    assert row.receipt == {"seq": 1}
    assert row.due_at is None
    assert outbox.status().backlog == 0


def test_o4_a_failing_transport_means_not_delivered_and_backs_off_per_row(
    engine, outbox, recorder, clock
):
    add(engine, outbox, "ok", "bad")
    recorder.fail_for = {"bad"}
    backoff = inboxguard.outbox.exponential_backoff(dt.timedelta(seconds=10))
    with inboxguard.Dispatcher(outbox, recorder, backoff=backoff) as dispatcher:
        assert dispatcher.run_once() == 1
        bad = outbox.get("bad")
        assert (bad.delivered_at, bad.attempts) == (None, 1)
        assert bad.due_at == clock.now + dt.timedelta(seconds=10)
        assert "ConnectionError: broker unreachable" in bad.last_error
        assert dispatcher.run_once() == 0  # not due yet
        clock.advance(dt.timedelta(seconds=10))
        assert dispatcher.run_once() == 0  # fails again; next delay doubles
        assert outbox.get("bad").due_at == clock.now + dt.timedelta(seconds=20)
        recorder.fail_for = set()
        clock.advance(dt.timedelta(seconds=20))
        assert dispatcher.run_once() == 1
    assert recorder.ids() == ["ok", "bad"]
    assert outbox.get("bad").attempts == 3


def test_o5_dead_after_max_attempts_visible_and_retryable(engine, outbox, recorder, clock):
    add(engine, outbox, "poison")
    recorder.fail_for = {"poison"}
    with inboxguard.Dispatcher(outbox, recorder, max_attempts=2) as dispatcher:
        dispatcher.run_once()
        clock.advance(dt.timedelta(minutes=10))
        dispatcher.run_once()
        clock.advance(dt.timedelta(minutes=10))
        assert dispatcher.run_once() == 0
    assert outbox.status().dead == 1
    assert outbox.status().backlog == 0
    [dead] = outbox.dead()
    assert (dead.command_id, dead.attempts) == ("poison", 2)
    assert "broker unreachable" in dead.last_error

    recorder.fail_for = set()
    assert outbox.retry_dead() == 1
    with inboxguard.Dispatcher(outbox, recorder, max_attempts=2) as dispatcher:
        assert dispatcher.run_once() == 1
    assert recorder.ids() == ["poison"]
    assert outbox.status().dead == 0


def test_o6_crash_between_send_and_record_resends_the_same_id(
    engine, outbox, recorder, clock, monkeypatch
):
    add(engine, outbox, "a", "b")
    crashed = inboxguard.Dispatcher(outbox, recorder, lease=dt.timedelta(seconds=30))

    def die(*_args):
        raise SystemExit("killed before recording")

    monkeypatch.setattr(crashed, "_record", die)
    with pytest.raises(SystemExit):
        crashed.run_once()
    crashed.close()
    assert recorder.ids() == ["a", "b"]
    assert outbox.status().backlog == 2  # nothing recorded: not delivered

    with inboxguard.Dispatcher(outbox, recorder) as second:
        assert second.run_once() == 0  # still leased to the crashed dispatcher
        clock.advance(dt.timedelta(seconds=30))
        assert second.run_once() == 2
    assert recorder.ids() == ["a", "b", "a", "b"]  # same IDs: the inbox absorbs them
    assert outbox.get("a").attempts == 2


def test_o6_rows_are_not_sent_on_a_nearly_expired_lease(engine, outbox, clock):
    add(engine, outbox, "a", "b", "c")
    sent = []

    def slow(message):
        sent.append(message.command_id)
        clock.advance(dt.timedelta(seconds=25))  # each send takes 25 s of a 60 s lease

    with inboxguard.Dispatcher(outbox, slow, lease=dt.timedelta(seconds=60)) as dispatcher:
        assert dispatcher.run_once() == 2
        c = outbox.get("c")
        assert (c.attempts, c.due_at, c.delivered_at) == (0, clock.now, None)
        assert dispatcher.run_once() == 1
    assert sent == ["a", "b", "c"]


@pytest.mark.parametrize("db", ["postgresql", "mysql"])
def test_o7_concurrent_dispatchers_never_send_a_row_twice(request, db, prefix):
    url = request.getfixturevalue({"postgresql": "pg_url", "mysql": "mysql_url"}[db])
    engine = create_engine(url, pool_size=10)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    try:
        ids = [f"cmd-{n}" for n in range(300)]
        with Session(engine) as session, session.begin():
            for cid in ids:
                outbox.add(session, command_id=cid, destination="d", payload={"n": cid})
        sent: list[str] = []
        lock = threading.Lock()

        def transport(message):
            with lock:
                sent.append(message.command_id)

        def drain():
            with inboxguard.Dispatcher(outbox, transport, batch_size=7) as dispatcher:
                while outbox.status().backlog:
                    dispatcher.run_once()

        threads = [threading.Thread(target=drain) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(sent) == sorted(ids)  # each exactly once
        assert outbox.status().backlog == 0
    finally:
        outbox.drop_schema()
        engine.dispose()


def test_o7_sqlite_refuses_a_second_dispatcher(sqlite_url, prefix, recorder):
    engine = create_engine(sqlite_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    first = inboxguard.Dispatcher(outbox, recorder)
    first.run_once()
    second = inboxguard.Dispatcher(outbox, recorder)
    with pytest.raises(inboxguard.ConfigurationError, match="one dispatcher"):
        second.run_once()
    first.close()
    assert second.run_once() == 0  # the lock is free again
    second.close()
    engine.dispose()


def test_o11_run_forever_stops_on_request_after_recording(engine, outbox, recorder):
    add(engine, outbox, "a")
    dispatcher = inboxguard.Dispatcher(
        outbox, recorder, poll_interval=dt.timedelta(milliseconds=50)
    )
    thread = threading.Thread(target=dispatcher.run_forever)
    thread.start()
    try:
        from tests.outbox.helpers import wait_until

        wait_until(lambda: outbox.status().delivered == 1, timeout=10)
    finally:
        dispatcher.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert dispatcher.stats.delivered == 1


def test_o11_wakeup_delivers_before_the_poll_interval(pg_url, prefix, recorder):
    engine = create_engine(pg_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    dispatcher = inboxguard.Dispatcher(
        outbox, recorder, poll_interval=dt.timedelta(seconds=120), wakeup=True
    )
    thread = threading.Thread(target=dispatcher.run_forever)
    thread.start()
    try:
        from tests.outbox.helpers import wait_until

        wait_until(lambda: dispatcher._listener is not None, timeout=10)
        add(engine, outbox, "woken")
        # Polling alone would wait 120 s; the NOTIFY at commit wakes it now.
        wait_until(lambda: recorder.ids() == ["woken"], timeout=20)
    finally:
        dispatcher.stop()
        thread.join(10)
        outbox.drop_schema()
        engine.dispose()


def test_o9_dispatch_and_compaction_honour_batch_size(engine, outbox, clock, recorder):
    """No pass sends, and no compaction transaction touches, more than ``batch_size`` rows."""
    add(engine, outbox, *(f"c{n}" for n in range(7)))
    with inboxguard.Dispatcher(outbox, recorder, batch_size=3) as dispatcher:
        passes = [dispatcher.run_once() for _ in range(4)]
    assert passes == [3, 3, 1, 0]
    assert sorted(recorder.ids()) == [f"c{n}" for n in range(7)]

    writes: list[object] = []  # each write's row count, and "commit" at each commit

    def on_write(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith(("UPDATE", "DELETE")):
            writes.append(cursor.rowcount)

    def on_commit(conn):
        writes.append("commit")

    event.listen(engine, "after_cursor_execute", on_write)
    event.listen(engine, "commit", on_commit)
    try:
        clock.advance(dt.timedelta(days=2))
        assert outbox.compact(batch_size=3) == CompactionResult(compacted=7, purged=0)
        clock.advance(dt.timedelta(days=40))
        assert outbox.compact(batch_size=3) == CompactionResult(compacted=0, purged=7)
    finally:
        event.remove(engine, "after_cursor_execute", on_write)
        event.remove(engine, "commit", on_commit)
    counts = [w for w in writes if w != "commit"]
    assert max(counts) == 3
    assert sum(counts) == 14
    # Every batch is a transaction of its own: a commit follows each write.
    assert writes == [w for n in counts for w in (n, "commit")]
    assert outbox.status().delivered == 0


def test_o11_sigterm_with_a_batch_in_flight_records_the_sent_and_hands_back_the_rest(
    engine, prefix, tmp_path
):
    """SIGTERM while the 2nd of 5 sends is in flight: that send finishes and is
    recorded with the 1st; the other 3 are never sent and stay due, unattempted."""
    box = inboxguard.Outbox(engine, table_prefix=prefix)
    box.create_schema()
    try:
        add(engine, box, *(f"c{n}" for n in range(5)))
        log, gate = tmp_path / "sends.log", tmp_path / "gate"
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "INBOXGUARD_DATABASE_URL": engine.url.render_as_string(hide_password=False),
            "OUTBOX_TEST_LOG": str(log),
            "OUTBOX_TEST_HOLD": "c1",
            "OUTBOX_TEST_GATE": str(gate),
        }
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "inboxguard", "outbox", "dispatch"),
                *("--batch-size", "5", "--poll-interval", "0.1", "--table-prefix", prefix),
                *("--transport", "tests.outbox.gated_transport:send"),
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_until(lambda: log.exists() and "sending c1" in log.read_text(), timeout=30)
            proc.send_signal(signal.SIGTERM)
            gate.touch()  # the in-flight send completes after the signal arrived
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, err
        assert "stopped: delivered 2" in out
        assert log.read_text().split("\n")[:-1] == [
            "sending c0",
            "sent c0",
            "sending c1",
            "sent c1",
        ]
        for cid in ("c0", "c1"):
            assert box.get(cid).delivered_at is not None
        for cid in ("c2", "c3", "c4"):
            row = box.get(cid)
            assert (row.delivered_at, row.attempts, row.dead_at) == (None, 0, None)
            assert row.due_at is not None
        assert box.status().backlog == 3
    finally:
        box.drop_schema()


def test_bad_dispatcher_arguments_are_refused(engine, outbox, recorder):
    with pytest.raises(inboxguard.ConfigurationError, match="batch_size"):
        inboxguard.Dispatcher(outbox, recorder, batch_size=0)
    with pytest.raises(inboxguard.ConfigurationError, match="transport"):
        inboxguard.Dispatcher(outbox, "not callable")
    if engine.dialect.name != "postgresql":
        with pytest.raises(inboxguard.ConfigurationError, match="LISTEN"):
            inboxguard.Dispatcher(outbox, recorder, wakeup=True)
