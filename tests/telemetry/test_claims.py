"""M1-M4: claims counted by outcome where the guard decides them, spans around
claim, handler and commit in the adapters, the duplicate flag visible to the
application, and telemetry that can be switched off or fail without harm."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from celery.signals import task_postrun
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message
from sqlalchemy import create_engine, insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard._telemetry import _otel
from inboxguard.adapters.celery import inbox_task
from inboxguard.adapters.kombu import guarded
from integrations.payments import payments_table
from tests.adapters.generic_support import paid
from tests.conftest import unique
from tests.telemetry.conftest import Sdk

DAY = dt.timedelta(days=1)


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlite_url)
    yield engine
    engine.dispose()


def _box(engine: Engine, prefix: str, **options: Any) -> inboxguard.Inbox:
    box = inboxguard.Inbox(engine, retention=DAY, table_prefix=prefix, **options)
    box.create_schema()
    payments_table(prefix).metadata.create_all(engine)
    return box


def _run(box: inboxguard.Inbox, cid: str, payload: object, **kw: Any) -> bool:
    """One guarded command; True when its block applied it (fresh)."""
    with Session(box.engine) as session, session.begin():
        with box.guard(session, consumer="pay", command_id=cid, payload=payload, **kw) as entry:
            if not entry.duplicate:
                session.execute(
                    insert(payments_table(box.table_prefix)).values(command_id=cid, amount=1)
                )
            return not entry.duplicate


def test_m1_each_claim_outcome_is_counted_once_with_its_duration(
    sdk: Sdk, sqlite_engine: Engine, prefix: str
) -> None:
    box = _box(sqlite_engine, prefix)
    assert _run(box, "c1", {"a": 1})
    assert not _run(box, "c1", {"a": 1})
    with pytest.raises(inboxguard.PayloadMismatchError):
        _run(box, "c1", {"a": 2})
    old = dt.datetime.now(dt.UTC) - 3 * DAY
    with pytest.raises(inboxguard.BeyondRetentionError):
        _run(box, "c2", {"a": 1}, sent_at=old)
    for outcome in ("fresh", "duplicate", "mismatch", "beyond_retention"):
        assert sdk.total("inboxguard.claims", consumer="pay", outcome=outcome) == 1, outcome
    assert sdk.total("inboxguard.claim.duration", consumer="pay") == 4
    claims = sdk.spans("inboxguard.claim")
    assert sorted(s.attributes["inboxguard.outcome"] for s in claims) == [
        "beyond_retention",
        "duplicate",
        "fresh",
        "mismatch",
    ]
    assert {s.attributes["inboxguard.command_id"] for s in claims} == {"c1", "c2"}
    # the handler span wraps only the blocks that ran (the refusals never reach one)
    handled = sdk.spans("inboxguard.handler")
    assert [s.attributes["inboxguard.outcome"] for s in handled] == ["fresh", "duplicate"]
    assert paid(box.engine, prefix, "c1") == [1]


def test_m1_a_claim_held_by_another_transaction_counts_in_progress(
    sdk: Sdk, pg_url: str, prefix: str
) -> None:
    engine = create_engine(pg_url)
    box = _box(engine, prefix, lock_timeout=dt.timedelta(milliseconds=200))
    try:
        with Session(engine) as holder, holder.begin():
            with box.guard(holder, consumer="pay", command_id="busy", payload={}) as entry:
                assert not entry.duplicate
                with pytest.raises(inboxguard.InProgressError):
                    _run(box, "busy", {})
        assert sdk.total("inboxguard.claims", outcome="in_progress") == 1
        assert sdk.total("inboxguard.claims", outcome="fresh") == 1
    finally:
        box.drop_schema()
        engine.dispose()


def test_m2_telemetry_false_records_nothing(sdk: Sdk, sqlite_engine: Engine, prefix: str) -> None:
    box = _box(sqlite_engine, prefix, telemetry=False)
    assert _run(box, "c1", {})
    assert not _run(box, "c1", {})
    assert sdk.points("inboxguard.claims") == []
    assert sdk.spans() == []
    with pytest.raises(inboxguard.ConfigurationError, match="telemetry must be True or False"):
        inboxguard.Inbox(sqlite_engine, retention=DAY, telemetry="false")  # type: ignore[arg-type]


class _Boom:
    """A meter, instrument, tracer and span whose every call raises."""

    def __getattr__(self, name: str) -> Any:
        def boom(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError(f"telemetry backend down ({name})")

        return boom


def test_m3_a_failing_meter_and_tracer_never_break_a_consumer(
    sqlite_engine: Engine, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry import context, trace

    _otel.reset(_otel.build(_Broken(), _Boom(), trace, context), forget=False)
    try:
        box = _box(sqlite_engine, prefix)
        seen: list[str] = []
        callback = _kombu_callback(box, seen)
        with caplog.at_level(logging.WARNING, logger="inboxguard.telemetry"):
            _deliver(callback, {"command_id": "k1", "amount": 1}, times=2)
            assert _run(box, "c1", {})
            with pytest.raises(inboxguard.PayloadMismatchError):
                _run(box, "c1", {"x": 1})
    finally:
        _otel.reset()
    assert seen == ["k1"]
    assert paid(box.engine, prefix, "k1") == [1]
    assert paid(box.engine, prefix, "c1") == [1]
    assert len(box.quarantined()) == 1
    assert "carrying on without it" in caplog.text


class _Broken:
    """A meter whose instruments raise on every use."""

    def create_counter(self, *args: Any, **kwargs: Any) -> Any:
        return _Boom()

    create_histogram = create_counter


def _kombu_callback(box: inboxguard.Inbox, seen: list[str]) -> Any:
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


def _deliver(callback: Any, body: dict[str, Any], times: int) -> None:
    name = unique("q")
    queue = Queue(name)
    with Connection("memory://") as conn:
        for _ in range(times):
            Producer(conn).publish(body, routing_key=name, declare=[queue], serializer="json")
        with Consumer(conn, queues=[queue], callbacks=[callback], accept=["json"]):
            for _ in range(times):
                conn.drain_events(timeout=5)


def test_m2_kombu_deliveries_carry_claim_handler_and_commit_spans(
    sdk: Sdk, sqlite_engine: Engine, prefix: str
) -> None:
    box = _box(sqlite_engine, prefix)
    seen: list[str] = []
    _deliver(_kombu_callback(box, seen), {"command_id": "k1", "amount": 3}, times=2)
    assert seen == ["k1"]
    by_name: dict[str, list[Any]] = {}
    for span in sdk.spans():
        by_name.setdefault(span.name, []).append(span)
    assert set(by_name) == {"inboxguard.claim", "inboxguard.handler", "inboxguard.commit"}
    assert len(by_name["inboxguard.commit"]) == 2
    for spans in by_name.values():
        assert [s.attributes["inboxguard.consumer"] for s in spans] == ["payments"] * 2
        assert [s.attributes["inboxguard.command_id"] for s in spans] == ["k1"] * 2
    for name in ("inboxguard.claim", "inboxguard.handler", "inboxguard.commit"):
        outcomes = [s.attributes["inboxguard.outcome"] for s in by_name[name]]
        assert outcomes == ["fresh", "duplicate"], name
    assert sdk.total("inboxguard.claims", consumer="payments", outcome="duplicate") == 1


def test_m4_celery_commit_span_and_the_duplicate_flag_after_the_task(
    sdk: Sdk, sqlite_engine: Engine, prefix: str
) -> None:
    box = _box(sqlite_engine, prefix)
    app = Celery(unique("app"), broker="memory://", set_as_current=False)
    table = payments_table(prefix)
    flags: list[tuple[str, bool]] = []

    @inbox_task(box, session_factory=sessionmaker(sqlite_engine), command_id="ref", app=app)
    def charge(ref: str) -> str:
        inboxguard.current_session().execute(insert(table).values(command_id=ref, amount=1))
        return ref

    def after(task_id: str, **_: Any) -> None:
        flags.append((task_id, inboxguard.current_entry().duplicate))

    task_postrun.connect(after, weak=False)
    try:
        assert charge.apply(args=("r1",), task_id="t1").get() == "r1"
        assert charge.apply(args=("r1",), task_id="t2").get() == "r1"
    finally:
        task_postrun.disconnect(after)
    assert flags == [("t1", False), ("t2", True)]
    assert [s.attributes["inboxguard.command_id"] for s in sdk.spans("inboxguard.commit")] == [
        "r1",
        "r1",
    ]
    assert paid(box.engine, prefix, "r1") == [1]


def test_m4_the_entry_stays_visible_after_a_handler_call_and_is_per_thread(
    sqlite_engine: Engine, prefix: str
) -> None:
    box = _box(sqlite_engine, prefix, telemetry=False)

    @box.handler(consumer="h", command_id="ref")
    def apply(session: Session, ref: str) -> str:
        assert inboxguard.current_entry().duplicate is False
        return ref.upper()

    with Session(sqlite_engine) as session, session.begin():
        assert apply(session, "a") == "A"
    assert inboxguard.current_entry().duplicate is False
    with Session(sqlite_engine) as session, session.begin():
        assert apply(session, "a") == "A"
    assert inboxguard.current_entry().duplicate is True
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            inboxguard.current_entry()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert [type(e) for e in errors] == [inboxguard.NoActiveGuardError]


async def _async_guard(url: str, prefix: str, sdk: Sdk) -> list[bool]:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    engine = create_async_engine(url.replace("sqlite://", "sqlite+aiosqlite://"))
    box = inboxguard.Inbox(create_engine(url), retention=DAY, table_prefix=prefix)
    box.create_schema()
    flags = []
    try:
        for _ in range(2):
            async with AsyncSession(engine) as session, session.begin():
                async with box.guard_async(session, consumer="a", command_id="x", payload={}):
                    pass
            flags.append(inboxguard.current_entry().duplicate)
    finally:
        await engine.dispose()
    return flags


def test_m2_the_asyncio_guard_reports_the_same_claims_and_spans(
    sdk: Sdk, sqlite_url: str, prefix: str
) -> None:
    import asyncio

    assert asyncio.run(_async_guard(sqlite_url, prefix, sdk)) == [False, True]
    assert sdk.total("inboxguard.claims", consumer="a", outcome="fresh") == 1
    assert sdk.total("inboxguard.claims", consumer="a", outcome="duplicate") == 1
    assert len(sdk.spans("inboxguard.handler")) == 2


def test_bt14_batch_claims_count_each_entry_once(
    sdk: Sdk, sqlite_engine: Engine, prefix: str
) -> None:
    """BT14: guard_batch reports one claim per command, with its outcome and
    duration, like guard()."""
    box = _box(sqlite_engine, prefix)
    assert _run(box, "c1", {"a": 1})
    old = dt.datetime.now(dt.UTC) - 3 * DAY
    commands = [
        ("c1", {"a": 1}),
        ("c1", {"a": 2}),
        ("c2", {"a": 1}),
        inboxguard.BatchCommand("c3", {}, sent_at=old),
    ]
    with Session(box.engine) as session, session.begin():
        with box.guard_batch(session, consumer="pay", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["duplicate", "refused", "fresh", "refused"]
    expected = {"fresh": 2, "duplicate": 1, "mismatch": 1, "beyond_retention": 1}
    for outcome, n in expected.items():  # c1's first claim (guard) is the other fresh one
        assert sdk.total("inboxguard.claims", consumer="pay", outcome=outcome) == n, outcome
    assert sdk.total("inboxguard.claim.duration", consumer="pay") == 5


def test_a_claim_probe_records_only_once_a_provider_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a meter or tracer provider the API's instruments drop every
    measurement, so a claim makes no probe; installing either one brings it back."""
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_internal

    from inboxguard._telemetry import _NO_PROBE, telemetry_for

    monkeypatch.delenv("OTEL_PYTHON_METER_PROVIDER", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_TRACER_PROVIDER", raising=False)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    _otel.reset()
    try:
        telemetry = telemetry_for(True)
        assert telemetry.claim("c", "x") is _NO_PROBE
        monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", object())
        assert telemetry.claim("c", "x") is not _NO_PROBE
        monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", object())
        assert telemetry.claim("c", "x") is not _NO_PROBE
    finally:
        _otel.reset()
