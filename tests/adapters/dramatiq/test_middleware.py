"""InboxMiddleware on Dramatiq's StubBroker and a real PostgreSQL: each outcome
of the guard mapped to what Dramatiq does with the message."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq import Message, Middleware, Retry, Worker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Retries
from dramatiq.results import Results
from dramatiq.results.backends import StubBackend
from sqlalchemy import Column, Integer, MetaData, String, Table, event, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard import errors
from inboxguard._core.outcome import Disposition
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.adapters.dramatiq._guard import NEVER_RETRIED
from inboxguard.adapters.dramatiq._windows import retry_span

pytestmark = pytest.mark.postgresql
QUEUE = "default"


class Spy(Middleware):
    """Records the exception of every processed message."""

    def __init__(self) -> None:
        self.exceptions: list[BaseException | None] = []

    def after_process_message(self, broker: Any, message: Any, *, result=None, exception=None):
        self.exceptions.append(exception)


@pytest.fixture
def box(engine: Engine, prefix: str) -> Iterator[inboxguard.Inbox]:
    policy = inboxguard.RetentionPolicy(replay=dt.timedelta(days=60))
    inbox = inboxguard.Inbox(
        engine, retention=policy, table_prefix=prefix, lock_timeout=dt.timedelta(seconds=0.3)
    )
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()


@pytest.fixture
def effects(engine: Engine, prefix: str) -> Iterator[Table]:
    table = Table(
        f"{prefix}effects",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("order_id", String(40)),
        Column("qty", Integer),
    )
    table.create(engine)
    yield table
    table.drop(engine)


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine)


@pytest.fixture
def stub(box: inboxguard.Inbox, sessions: sessionmaker[Session]) -> Iterator[Any]:
    broker = StubBroker()
    broker.emit_after("process_boot")
    broker.backend = StubBackend()
    broker.add_middleware(Results(backend=broker.backend))
    broker.spy = Spy()
    broker.add_middleware(broker.spy)
    broker.add_middleware(
        InboxMiddleware(box, session_factory=sessions, busy_delay=dt.timedelta(milliseconds=20))
    )
    yield broker
    broker.flush_all()
    broker.close()


@pytest.fixture
def worker(stub: Any) -> Iterator[Worker]:
    running = Worker(stub, worker_timeout=50, worker_threads=2)
    running.start()
    yield running
    running.stop()


def declare_apply(broker: Any, effects: Table, **options: Any) -> Any:
    calls: list[str] = []
    if "store_results" in broker.actor_options:
        options.setdefault("store_results", True)
    options.setdefault("min_backoff", 10)
    options.setdefault("inbox_command_id", "order_id")

    @dramatiq.actor(broker=broker, **options)
    def apply(order_id: str, qty: int) -> dict[str, int]:
        calls.append(order_id)
        inboxguard.current_session().execute(insert(effects).values(order_id=order_id, qty=qty))
        return {"qty": qty}

    apply.calls = calls
    return apply


def rows(engine: Engine, effects: Table) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(effects.c.order_id, effects.c.qty))]


def test_duplicate_command_returns_stored_result_without_running(
    stub: Any, worker: Worker, effects: Table, engine: Engine
) -> None:
    """A second message for the same command is acked with the first result;
    the body ran once."""
    apply = declare_apply(stub, effects)
    first = apply.send("o-1", 3)
    stub.join(QUEUE)
    second = apply.send("o-1", 3)
    stub.join(QUEUE)
    worker.join()

    assert rows(engine, effects) == [("o-1", 3)]
    assert apply.calls == ["o-1"]
    assert stub.backend.get_result(second) == stub.backend.get_result(first) == {"qty": 3}
    assert stub.dead_letters == []


def test_mismatch_is_quarantined_and_dead_lettered_without_retry(
    stub: Any, worker: Worker, effects: Table, engine: Engine, box: inboxguard.Inbox
) -> None:
    """Same command, other payload: dead-lettered at once, quarantined with the
    message's details, business state untouched."""
    apply = declare_apply(stub, effects, inbox_consumer="orders.apply")
    apply.send("o-1", 3)
    stub.join(QUEUE)
    tampered = apply.send("o-1", 4)
    stub.join(QUEUE, fail_fast=False)
    worker.join()

    [dead] = stub.dead_letters
    assert dead.message_id == tampered.message_id
    assert "retries" not in dead.options
    assert isinstance(stub.spy.exceptions[-1], inboxguard.PayloadMismatchError)
    [record] = box.quarantined("orders.apply")
    assert record.reason == "payload_mismatch"
    assert record.details["message_id"] == tampered.message_id
    assert record.details["kwargs"] == {}
    assert record.details["args"] == ["o-1", 4]
    assert rows(engine, effects) == [("o-1", 3)]


def test_mismatch_is_not_retried_when_the_message_sets_its_own_throws(
    stub: Any, worker: Worker, effects: Table, engine: Engine
) -> None:
    """A message-level ``throws`` (which Dramatiq prefers to the actor's; a
    middleware can set it at run time) does not turn a refusal into a retry."""

    class OwnThrows(Middleware):
        def before_process_message(self, broker: Any, message: Any) -> None:
            message.options["throws"] = (KeyError,)

    stub.add_middleware(OwnThrows())
    apply = declare_apply(stub, effects)
    apply.send("o-1", 3)
    stub.join(QUEUE)
    tampered = apply.send("o-1", 4)
    stub.join(QUEUE, fail_fast=False)
    worker.join()

    assert [m.message_id for m in stub.dead_letters] == [tampered.message_id]
    assert "retries" not in stub.dead_letters[0].options
    assert rows(engine, effects) == [("o-1", 3)]


def test_message_older_than_horizon_is_quarantined_and_dead_lettered(
    stub: Any, worker: Worker, effects: Table, engine: Engine, box: inboxguard.Inbox
) -> None:
    """A message whose timestamp is older than the horizon never runs."""
    declare_apply(stub, effects)
    old = int((time.time() - 61 * 86400) * 1000)
    message = Message(
        queue_name=QUEUE,
        actor_name="apply",
        args=("o-1", 3),
        kwargs={},
        options={},
        message_timestamp=old,
    )
    stub.enqueue(message)
    stub.join(QUEUE, fail_fast=False)
    worker.join()

    assert [m.message_id for m in stub.dead_letters] == [message.message_id]
    [record] = box.quarantined("apply")
    assert record.reason == "beyond_retention"
    assert rows(engine, effects) == []


def test_busy_claim_is_retried_then_applied_once(
    stub: Any, worker: Worker, effects: Table, engine: Engine, box: inboxguard.Inbox
) -> None:
    """While another transaction holds the command, the message is retried
    (dramatiq.Retry), not acked; it is applied once the holder rolls back."""
    apply = declare_apply(stub, effects)
    payload = {"args": ["o-1", 3], "kwargs": {}}
    with Session(engine) as holder, holder.begin():
        with box.guard(holder, consumer="apply", command_id="o-1", payload=payload):
            apply.send("o-1", 3)
            deadline = time.monotonic() + 10
            while not any(isinstance(e, Retry) for e in stub.spy.exceptions):
                assert time.monotonic() < deadline, "no retry while the claim was held"
                time.sleep(0.02)
        holder.rollback()
    stub.join(QUEUE)
    worker.join()

    retry = next(e for e in stub.spy.exceptions if isinstance(e, Retry))
    assert isinstance(retry.__cause__, inboxguard.InProgressError)
    assert rows(engine, effects) == [("o-1", 3)]


def test_failed_commit_is_retried_never_acked_as_done(
    box: inboxguard.Inbox, effects: Table, engine: Engine
) -> None:
    """A connection lost during COMMIT: the message is retried, and the retry
    applies the command exactly once."""
    failures = [True]

    def factory() -> Session:
        session = Session(engine)

        @event.listens_for(session, "before_commit")
        def lose_connection(_: Session) -> None:
            if failures:
                failures.pop()
                raise OperationalError("COMMIT", {}, Exception("lost"), connection_invalidated=True)

        return session

    broker = StubBroker()
    broker.emit_after("process_boot")
    spy = Spy()
    broker.add_middleware(spy)
    broker.add_middleware(InboxMiddleware(box, session_factory=factory))
    running = Worker(broker, worker_timeout=50, worker_threads=1)
    running.start()
    try:
        apply = declare_apply(broker, effects)
        apply.send("o-1", 3)
        broker.join(QUEUE)
        running.join()
    finally:
        running.stop()
        broker.close()

    assert isinstance(spy.exceptions[0], Retry)
    assert spy.exceptions[1:] == [None]
    assert rows(engine, effects) == [("o-1", 3)]


def test_command_id_from_a_callable_and_explicit_consumer(
    stub: Any, worker: Worker, effects: Table, engine: Engine, box: inboxguard.Inbox
) -> None:
    """``inbox_command_id`` may be a callable over the actor's arguments; the
    evidence is recorded under ``inbox_consumer``."""
    apply = declare_apply(
        stub,
        effects,
        inbox_command_id=lambda order_id, qty: f"ship:{order_id}",
        inbox_consumer="orders.ship",
    )
    apply.send("o-1", 3)
    apply.send("o-1", 3)
    stub.join(QUEUE)
    worker.join()

    assert rows(engine, effects) == [("o-1", 3)]
    record = box.lookup("orders.ship", "ship:o-1")
    assert record is not None
    assert record.result == {"qty": 3}


def test_direct_call_is_guarded_too(stub: Any, effects: Table, engine: Engine) -> None:
    """Calling the actor in-process (no message) still runs the command once."""
    apply = declare_apply(stub, effects)
    assert apply("o-1", 3) == apply("o-1", 3) == {"qty": 3}
    assert rows(engine, effects) == [("o-1", 3)]


def test_actor_without_inbox_options_is_untouched(stub: Any) -> None:
    """Actors that do not ask for the inbox keep their own function."""

    def plain(x: int) -> int:
        return x

    actor = dramatiq.actor(plain, broker=stub)
    assert actor.fn is plain


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"inbox_command_id": "missing"}, "names no argument"),
        ({"inbox_consumer": "c"}, "without inbox_command_id"),
        ({"inbox_command_id": "order_id", "inbox_exclude": [1]}, "inbox_exclude"),
        ({"inbox_command_id": "order_id", "inbox_consumer": " x"}, "consumer"),
    ],
)
def test_bad_inbox_options_fail_at_declaration(stub: Any, options: Any, match: str) -> None:
    """Misconfigured actors are refused when declared, naming the option."""

    def f(order_id: str) -> None:
        return None

    with pytest.raises(inboxguard.InboxGuardError, match=match):
        dramatiq.actor(f, broker=stub, **options)


def test_async_actor_is_refused_at_declaration(stub: Any) -> None:
    """An async def actor needs an async_session_factory (see test_async_actors.py)."""

    async def f(order_id: str) -> None:
        return None

    with pytest.raises(inboxguard.ConfigurationError, match="async def"):
        dramatiq.actor(f, broker=stub, inbox_command_id="order_id")


def test_worker_refuses_to_start_when_retries_outlive_the_horizon(
    engine: Engine, prefix: str, sessions: sessionmaker[Session], effects: Table
) -> None:
    """Dramatiq's default Retries schedule (20 retries, up to 7 days apart)
    outlives a 10-day horizon: Worker.start raises and consumes nothing."""
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=10), table_prefix=prefix)
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(inbox, session_factory=sessions))
    declare_apply(broker, effects, min_backoff=15000)
    with pytest.raises(inboxguard.RetentionMisalignedError, match="retry_schedule"):
        Worker(broker, worker_timeout=50).start()
    broker.close()


def test_worker_refuses_to_start_without_retries(
    engine: Engine, prefix: str, sessions: sessionmaker[Session]
) -> None:
    """Without Retries a busy command would be acked and lost: refuse."""
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=10), table_prefix=prefix)
    broker = StubBroker(middleware=[InboxMiddleware(inbox, session_factory=sessions)])
    with pytest.raises(inboxguard.ConfigurationError, match="Retries"):
        Worker(broker, worker_timeout=50).start()
    broker.close()


def test_retry_span_follows_dramatiq_backoff() -> None:
    """Each retry waits at most twice its backoff, capped by max_backoff."""
    assert retry_span(3, 1000, 10**9) == dt.timedelta(seconds=2 + 4 + 8)
    assert retry_span(3, 1000, 3000) == dt.timedelta(seconds=2 + 3 + 3)
    assert retry_span(0, 1000, 3000) == dt.timedelta(0)
    assert retry_span(None, 1000, 3000) > dt.timedelta(days=10**6)
    assert Retries().max_retries == 20  # the default the boot check reads


def test_default_dramatiq_settings_fit_a_47_day_window(
    engine: Engine, prefix: str, sessions: sessionmaker[Session], effects: Table
) -> None:
    """Dramatiq's default Retries schedule lasts at most 46 days 9 hours (20
    retries, jitter up to twice the backoff, 7-day cap): a 47-day window fits."""
    policy = inboxguard.RetentionPolicy(replay=dt.timedelta(days=47))
    inbox = inboxguard.Inbox(engine, retention=policy, table_prefix=prefix)
    broker = StubBroker()
    middleware = InboxMiddleware(inbox, session_factory=sessions)
    broker.add_middleware(middleware)
    declare_apply(broker, effects, min_backoff=15000)
    middleware.check_alignment(broker)
    broker.close()


def test_every_refusing_error_is_in_the_throws_of_a_guarded_actor() -> None:
    """Retries dead-letters at once exactly what the outcome policy refuses."""
    for name in (n for n in errors.__all__ if n.endswith("Error")):
        cls = getattr(errors, name)
        assert issubclass(cls, NEVER_RETRIED) is (cls.disposition is Disposition.REFUSE), name


def test_a_declared_failure_is_quarantined_and_dead_lettered_without_retry(
    stub: Any, worker: Worker, effects: Table, box: inboxguard.Inbox
) -> None:
    """Issue 19: ``ReconciliationRequiredError`` declares a failure; Retries used
    to retry it up to ``max_retries``. It now runs once, is quarantined under its
    code and dead-lettered."""
    calls: list[str] = []

    @dramatiq.actor(broker=stub, inbox_command_id="order_id", min_backoff=10, max_retries=3)
    def charge(order_id: str) -> None:
        calls.append(order_id)
        raise inboxguard.ReconciliationRequiredError("operator needed", effect_key=order_id)

    message = charge.send("o-9")
    stub.join(QUEUE, fail_fast=False)
    worker.join()
    assert calls == ["o-9"]
    assert [m.message_id for m in stub.dead_letters] == [message.message_id]
    [record] = box.quarantined("charge")
    assert (record.command_id, record.reason) == ("o-9", "reconciliation_required")


def test_inbox_require_sent_at_refuses_a_message_without_one(
    stub: Any,
    worker: Worker,
    effects: Table,
    engine: Engine,
    box: inboxguard.Inbox,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 19: a message with no ``message_timestamp`` is logged once by a
    plain actor and refused (``missing_sent_at``) by one requiring a sent time."""
    declare_apply(stub, effects)
    declare_strict = declare_apply(stub, effects, actor_name="strict", inbox_require_sent_at=True)
    messages = [
        Message(
            queue_name=QUEUE,
            actor_name=name,
            args=(oid, 1),
            kwargs={},
            options={},
            message_timestamp=0,
        )
        for name, oid in (("apply", "o-1"), ("apply", "o-2"), ("strict", "o-3"))
    ]
    with caplog.at_level("WARNING", logger="inboxguard.dramatiq"):
        for message in messages:
            stub.enqueue(message)
        stub.join(QUEUE, fail_fast=False)
        worker.join()
    assert caplog.text.count("received a message with no sent time") == 1
    assert "inbox_require_sent_at=True" in caplog.text
    assert sorted(rows(engine, effects)) == [("o-1", 1), ("o-2", 1)]
    assert declare_strict.calls == []
    assert [m.message_id for m in stub.dead_letters] == [messages[2].message_id]
    [record] = box.quarantined("strict")
    assert (record.command_id, record.reason) == ("o-3", "missing_sent_at")
