"""V1-V3 on Dramatiq, kombu, aio-pika and ``Inbox.handler``: every guarded
handler is listed, its windows come from the real settings, what cannot be
seen is unknown, and the lost-ack example holds on a real database."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Retries
from sqlalchemy.orm import Session, sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.adapters.kombu import guarded


def test_dramatiq_retries_change_the_table(table_inbox: inboxguard.Inbox) -> None:
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(table_inbox, session_factory=sessionmaker()))

    @dramatiq.actor(
        broker=broker,
        max_retries=5,
        inbox_command_id="order_id",
        inbox_consumer="shipping.ship",
        inbox_guarantee=inboxguard.Guarantee(no_external_effect=True),
    )
    def ship(order_id: str) -> None:
        return None

    (table,) = inboxguard.guarantees_of(broker)
    assert table.consumer == "shipping.ship"
    reviewed = inboxguard.read_lock(inboxguard.lock_text([table]))
    ship.options["max_retries"] = 50
    changes = inboxguard.lock_changes(inboxguard.guarantees_of(broker), reviewed)
    # The settlement row changed, and with it the retry schedule it makes.
    assert [(c.field, c.setting) for c in changes] == [
        ("delivery_mode", "max_retries"),
        ("dedup_window", "retry_schedule"),
    ]
    # 50 retries of Dramatiq's default backoff run for days: longer than the evidence
    (problem,) = inboxguard.contradictions_of(broker)
    assert (problem.field, problem.setting) == ("dedup_window", "retry_schedule")


def _give_up_after_two(retries: int, error: Exception) -> bool:
    return retries <= 2


def test_dramatiq_table_shows_every_settlement_row(table_inbox: inboxguard.Inbox) -> None:
    """The delivery mode lists each row of the Dramatiq settlement table as
    the worker's boot check reads it: a callable by its dotted name, a row
    whose middleware the broker lacks as not in effect."""
    broker = StubBroker(middleware=[Retries()])
    broker.add_middleware(InboxMiddleware(table_inbox, session_factory=sessionmaker()))

    @dramatiq.actor(broker=broker, retry_when=_give_up_after_two, inbox_command_id="order_id")
    def ship(order_id: str) -> None:
        return None

    (table,) = inboxguard.guarantees_of(broker)
    delivery = table.fact("delivery_mode")
    assert delivery is not None
    assert delivery.settings["Retries middleware"] is True
    assert delivery.settings["max_retries"] == 20
    assert delivery.settings["retry_when"] == f"{__name__}._give_up_after_two"
    assert delivery.settings["max_age"] == "not in effect: no such middleware; accepts None"


def test_dramatiq_refuses_a_declared_derived_field(table_inbox: inboxguard.Inbox) -> None:
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(table_inbox, session_factory=sessionmaker()))
    with pytest.raises(inboxguard.ConfigurationError, match="delivery_mode"):

        @dramatiq.actor(
            broker=broker,
            inbox_command_id="order_id",
            inbox_guarantee=inboxguard.Guarantee(delivery_mode="at most once"),
        )
        def ship(order_id: str) -> None:
            return None


def test_kombu_consumer_shows_its_settlement_rows(table_inbox: inboxguard.Inbox) -> None:
    def pay(body: Any, message: Any) -> None:
        return None

    guarded(
        pay,
        table_inbox,
        session_factory=sessionmaker(table_inbox.engine),
        consumer="payments",
        max_attempts=4,
        retry_delay=dt.timedelta(seconds=30),
    )
    (table,) = inboxguard.guarantees_of(table_inbox)
    delivery = table.fact("delivery_mode")
    assert delivery is not None
    # Set on the Consumer, out of the callback's sight: judged on each delivery.
    assert delivery.settings["no_ack"] == "judged on each delivery; accepts False"
    # No queue= given: only a delivery through the default exchange is copied (K15).
    assert delivery.settings["retry route"] == "no queue"
    dedup = table.fact("dedup_window")
    assert dedup is not None
    assert dedup.settings["retry_schedule"] == "1m30s"  # 3 retries x 30 s
    identity = table.fact("identity")
    assert identity is not None
    assert identity.settings["command_id"] == "header x-inbox-command-id"


def test_aio_pika_consumer_is_listed(table_inbox: inboxguard.Inbox) -> None:
    from inboxguard.adapters.aio_pika import guarded as guarded_async

    async def pay(body: Any, message: Any) -> None:
        return None

    guarded_async(
        pay,
        table_inbox,
        session_factory=sessionmaker(),  # type: ignore[arg-type]
        consumer="payments-async",
        # A stand-in for channel.default_exchange: the route is read, never used.
        exchange=SimpleNamespace(name=""),  # type: ignore[arg-type]
        queue="payments",
        command_id="command_id",
    )
    (table,) = inboxguard.guarantees_of([table_inbox])
    assert table.consumer == "payments-async"
    delivery = table.fact("delivery_mode")
    assert delivery is not None
    assert delivery.settings["retry route"] == "default exchange + queue"
    assert delivery.settings["no_ack"] == "judged on each delivery; accepts False"


def test_inbox_handler_lost_ack_example_holds(table_inbox: inboxguard.Inbox) -> None:
    """The table's lost-ack example, played on a real SQLite file: the first
    call commits, its ack is lost, the second call returns the stored result
    without running the handler again."""
    runs: list[str] = []

    @table_inbox.handler(
        consumer="billing.note",
        command_id="note_id",
        guarantee=inboxguard.Guarantee(
            delivery_mode="at least once: our poller re-reads until it records the offset",
            no_external_effect=True,
        ),
    )
    def note(session: Session, note_id: str) -> dict[str, str]:
        runs.append(note_id)
        return {"noted": note_id}

    (table,) = inboxguard.guarantees_of(table_inbox)
    assert table.lost_ack_example is not None
    assert "without running the handler" in table.lost_ack_example
    delivery = table.fact("delivery_mode")
    assert delivery is not None
    assert delivery.source == "declared"
    for _ in range(2):  # the delivery, then the copy after a lost ack
        with Session(table_inbox.engine) as session, session.begin():
            assert note(session, "n-1") == {"noted": "n-1"}
    assert runs == ["n-1"]
    assert table_inbox.lookup("billing.note", "n-1") is not None


def test_undeclared_is_unknown_never_guessed(table_inbox: inboxguard.Inbox) -> None:
    @table_inbox.handler(consumer="billing.plain", command_id="x")
    def plain(session: Session, x: str) -> None:
        return None

    (table,) = inboxguard.guarantees_of(table_inbox)
    for name in ("delivery_mode", "provider_behaviour", "reconciliation"):
        fact = table.fact(name)
        assert fact is not None
        assert (fact.value, fact.source) == (None, "unknown")
        assert table.to_json()[name]["value"] is None
    assert "not declared" in (table.unknown_case or "")


def test_bad_declarations_name_the_field() -> None:
    with pytest.raises(inboxguard.ConfigurationError, match="terminal_states"):
        inboxguard.Guarantee(terminal_states=[])
    with pytest.raises(inboxguard.ConfigurationError, match="provider"):
        inboxguard.Guarantee(provider="stripe")
    with pytest.raises(inboxguard.ConfigurationError, match="not both"):
        inboxguard.Guarantee(provider=inboxguard.known_contract("stripe"), no_external_effect=True)


def test_an_app_without_handlers_is_refused() -> None:
    with pytest.raises(inboxguard.ConfigurationError, match="no guarded handler"):
        inboxguard.guarantees_of(object())


def test_the_registry_lets_an_inbox_go(sqlite_url: str) -> None:
    """Listing handlers must not keep an inbox (its engine, its pooled
    connections) alive once the application dropped it."""
    import gc
    import weakref

    from sqlalchemy import create_engine

    box = inboxguard.Inbox(create_engine(sqlite_url), retention=dt.timedelta(days=1))

    @box.handler(consumer="gone", command_id="x")
    def gone(session: Session, x: str) -> None:
        return None

    guarded(
        lambda body, message: None,
        box,
        session_factory=sessionmaker(box.engine),
        consumer="gone-kombu",
    )
    assert len(inboxguard.guarantees_of(box)) == 2
    ref = weakref.ref(box)
    box.engine.dispose()
    del box, gone
    gc.collect()
    assert ref() is None
