"""End-to-end: a Celery worker never acks a command nothing settled (issue 20).

Real ``celery worker`` processes on Redis and RabbitMQ and PostgreSQL. Each
test fails on the adapter before the fix: the delivery was acked, and the
command lost, without being applied, quarantined or dead-lettered.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url, text

from integrations.celery.producer import commands
from integrations.celery.settings import TASK_NAME, create_app
from tests.adapters.celery.conftest import Reference, wait_until
from tests.outbox._proxy import TcpProxy

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

FAULTY = "tests.adapters.celery.faulty_app"
FAULTY_CONSUMER = "faulty.transfers"


@pytest.fixture
def db_proxy(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    """A TCP proxy in front of PostgreSQL, and the URL that goes through it."""
    url = make_url(pg_url)
    proxy = TcpProxy(url.port or 5432)
    proxy.start()
    yield proxy, url.set(port=proxy.port).render_as_string(hide_password=False)
    proxy.cut()


def _exits(worker: Any) -> tuple[int, str]:
    worker.start(wait_ready=False)
    assert worker.proc is not None
    return worker.proc.wait(60), worker.log()


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_c9_a_database_outage_is_retried_and_every_command_applied_once(
    reference: Any, broker: str, db_proxy: tuple[TcpProxy, str]
) -> None:
    """The database becomes unreachable (connections refused) while commands
    arrive: each delivery is retried, none is acked, and once the database is
    back every command is applied exactly once."""
    proxy, proxied_url = db_proxy
    ref: Reference = reference(broker)
    worker = ref.worker(concurrency=2, db_url=proxied_url)
    proxy.cut()
    items = commands(12, prefix="out")
    ref.publish(items)
    wait_until(lambda: worker.log().count("retrying in") >= 6, 30, "retries during the outage")
    assert ref.check().rows == 0
    proxy.start()
    wait_until(lambda: ref.check().transfers == len(items), 90, "every command applied")
    result = ref.check()
    assert (result.rows, result.applied_twice, result.balances_match) == (12, 0, True)
    assert ref.inbox().quarantined() == []
    wait_until(lambda: ref.ready_messages() == 0, 30, "the queue drained")


@pytest.mark.parametrize(
    ("broker", "limit"),
    [("redis", "IG_TIME_LIMIT"), ("rabbitmq", "IG_TIME_LIMIT"), ("redis", "IG_SOFT_TIME_LIMIT")],
)
def test_c10_a_timed_out_command_comes_back_and_applies_once(
    reference: Any, broker: str, limit: str, tmp_path: Path
) -> None:
    """A task that outlives its hard or soft time limit is not acked: the
    delivery comes back and the command is applied once."""
    ref: Reference = reference(broker)
    marker = tmp_path / "slow.marker"
    env = {limit: "2", "IG_SLOW_ONCE": "tl-slow", "IG_SLOW_MARKER": str(marker)}
    worker = ref.worker(concurrency=2, app=FAULTY, env=env)
    ref.publish([("tl-slow", "acct-1", 5), ("tl-1", "acct-2", 7)])
    wait_until(marker.exists, 30, "the slow run to start")
    wait_until(
        lambda: ref.check().transfers == 2, 60, f"both applied; log:\n{worker.log()[-3000:]}"
    )
    assert "ime limit" in worker.log()
    result = ref.check()
    assert (result.rows, result.applied_twice, result.balances_match) == (2, 0, True)
    wait_until(lambda: ref.ready_messages() == 0, 30, "the queue drained")


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("typo", "inbox_comand_id"),
        ("bad_argument", "names no argument"),
        ("acks_on_timeout", "inbox_accept_ack_on_failure"),
    ],
)
def test_c11_a_misdeclared_task_refuses_to_start_the_worker(
    reference: Any, fault: str, expected: str
) -> None:
    """``@app.task(base=InboxTask, ...)`` with a misspelled option, a command ID
    naming no argument, or acks on timeout turned back on: the worker exits
    before consuming, and the queued command is still in the broker."""
    ref: Reference = reference("redis")
    ref.publish([("tr-1", "acct-1", 5)])
    code, log = _exits(ref.worker(start=False, app=FAULTY, env={"IG_FAULT": fault}))
    assert code != 0
    assert expected in log
    assert ref.check().rows == 0
    assert ref.ready_messages() == 1


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_c12_an_unusable_command_id_or_result_is_quarantined_and_dead_lettered(
    reference: Any, broker: str
) -> None:
    """A command-ID callable that raises, and a result that cannot be stored (a
    naive datetime): each delivery is quarantined with its arguments, rolled
    back, and dead-lettered (RabbitMQ); the good command beside them applies."""
    ref: Reference = reference(broker)
    ref.worker(concurrency=2, app=FAULTY)
    ref.publish([("bad-1", "acct-1", 5), ("naive-1", "acct-2", 6), ("tr-ok", "acct-3", 7)])
    inbox = ref.inbox()
    records = wait_until(
        lambda: len(inbox.quarantined(FAULTY_CONSUMER)) == 2 and inbox.quarantined(FAULTY_CONSUMER),
        30,
        "two quarantine records",
    )
    by_reason = {r.reason: r for r in records}
    assert set(by_reason) == {"invalid_command", "payload_encoding"}
    assert by_reason["invalid_command"].details["args"] == ["bad-1", "acct-1", 5]
    assert by_reason["payload_encoding"].command_id == "naive-1"
    wait_until(lambda: ref.check().transfers == 1, 30, "the good command applied")
    assert ref.applied("naive-1") == 0  # rolled back with its unstorable result
    if broker == "rabbitmq":
        # dead_letters() takes what the queue holds now: collect until both arrived.
        dead: list[Any] = []

        def both_dead() -> bool:
            dead.extend(ref.dead_letters())
            return len(dead) >= 2

        wait_until(both_dead, 30, "dead letters")
        assert sorted(args[0] for args in dead) == ["bad-1", "naive-1"]


def test_c13_a_quarantine_record_that_cannot_be_written_keeps_the_delivery(
    reference: Any,
) -> None:
    """The quarantine table cannot be written: the refused delivery goes back to
    the broker (logged at ERROR) instead of being dropped; once the table is
    back, the record is written."""
    ref: Reference = reference("redis")
    worker = ref.worker(concurrency=1, app=FAULTY)
    table = ref.inbox().tables.quarantine.name
    with ref.engine.begin() as conn:
        conn.execute(text(f'ALTER TABLE "{table}" RENAME TO "{table}_away"'))
    try:
        ref.publish([("bad-2", "acct-1", 5)])
        wait_until(lambda: worker.log().count("goes back to the broker") >= 2, 60, "two requeues")
    finally:
        with ref.engine.begin() as conn:
            conn.execute(text(f'ALTER TABLE "{table}_away" RENAME TO "{table}"'))
    inbox = ref.inbox()
    [record] = wait_until(lambda: inbox.quarantined(FAULTY_CONSUMER), 60, "the record")
    assert record.reason == "invalid_command"
    assert record.details["args"] == ["bad-2", "acct-1", 5]


def test_c14_a_delayed_message_is_judged_from_when_it_was_due(reference: Any) -> None:
    """A message sent longer ago than the horizon but due only now (a long
    countdown) is applied; the same age without a due time is still refused."""
    ref: Reference = reference("redis", retention=dt.timedelta(hours=1))
    ref.worker(concurrency=1)
    horizon = ref.inbox().retention.horizon
    sent = (dt.datetime.now(dt.UTC) - horizon - dt.timedelta(minutes=5)).isoformat()
    app = create_app(ref.settings, include_tasks=False)
    try:
        for transfer_id, due in (("late-due", dt.timedelta(seconds=1)), ("late-old", None)):
            app.send_task(
                TASK_NAME,
                args=(transfer_id, "acct-1", 5),
                task_id=str(uuid.uuid4()),
                queue=ref.settings.queue,
                headers={"x-inbox-sent-at": sent},
                eta=dt.datetime.now(dt.UTC) + due if due else None,
            )
    finally:
        app.close()
    inbox = ref.inbox()
    [record] = wait_until(inbox.quarantined, 30, "the stale message refused")
    assert (record.command_id, record.reason) == ("late-old", "beyond_retention")
    wait_until(lambda: ref.applied("late-due") == 1, 30, "the delayed message applied")


def test_c15_a_worker_on_a_database_without_the_inbox_tables_refuses_to_start(
    reference: Any,
) -> None:
    """No inbox tables: the worker exits before consuming, naming
    create_schema(), and the queued commands are still in the broker."""
    ref: Reference = reference("redis")
    ref.inbox().drop_schema()
    ref.publish([("tr-1", "acct-1", 5), ("tr-2", "acct-2", 6)])
    code, log = _exits(ref.worker(start=False))
    assert code != 0
    assert "create_schema()" in log
    assert ref.ready_messages() == 2
