"""G12 for the adapters: a Celery task or a Dramatiq actor called positionally,
by keyword, or with a default written out is one command, run once."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task
from inboxguard.adapters.dramatiq import InboxMiddleware
from tests.conftest import unique

CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("inv-9", 100), {}),
    ((), {"invoice_id": "inv-9", "amount": 100}),
    (("inv-9",), {"amount": 100, "currency": "EUR"}),
]


@pytest.fixture
def box(sqlite_url: str) -> Iterator[inboxguard.Inbox]:
    """An inbox on a SQLite file of this test's own."""
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
    inbox.create_schema()
    yield inbox
    engine.dispose()


def test_celery_task_forms_of_one_call_run_once(box: inboxguard.Inbox) -> None:
    """apply() with positional, keyword and explicit-default arguments."""
    ran: list[str] = []

    @inbox_task(
        box,
        session_factory=sessionmaker(box.engine),
        command_id="invoice_id",
        consumer="billing.charge",
        name=unique("charge"),
    )
    def charge(invoice_id: str, amount: int, currency: str = "EUR") -> str:
        ran.append(invoice_id)
        return f"{invoice_id}:{amount}{currency}"

    results = [charge.apply(args=args, kwargs=kwargs).get() for args, kwargs in CALLS]
    assert results == ["inv-9:100EUR"] * 3
    assert ran == ["inv-9"]
    assert box.quarantined() == []


def test_dramatiq_actor_forms_of_one_call_run_once(box: inboxguard.Inbox) -> None:
    """Direct calls of a guarded actor with the three forms."""
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(box, session_factory=sessionmaker(box.engine)))
    ran: list[str] = []
    try:

        @dramatiq.actor(broker=broker, inbox_command_id="invoice_id")
        def charge(invoice_id: str, amount: int, currency: str = "EUR") -> str:
            ran.append(invoice_id)
            return f"{invoice_id}:{amount}{currency}"

        results = [charge(*args, **kwargs) for args, kwargs in CALLS]
    finally:
        broker.close()
    assert results == ["inv-9:100EUR"] * 3
    assert ran == ["inv-9"]
    assert box.quarantined() == []


def test_g26_celery_a_new_defaulted_parameter_keeps_a_redelivery_a_duplicate(
    box: inboxguard.Inbox,
) -> None:
    """A rolling deploy: version 2 of a task adds ``currency="EUR"``. The
    redelivery of a call version 1 applied (it did not pass ``currency``) is a
    duplicate under version 2, with the stored result, not a mismatch."""
    ran: list[str] = []
    # Two task names stand for the two deploys' processes (one Celery app here
    # keeps the first task of a name); the evidence is filed by consumer.
    options: dict[str, Any] = {
        "session_factory": sessionmaker(box.engine),
        "command_id": "invoice_id",
        "consumer": unique("billing.charge"),
        "shared_consumer": True,
    }

    @inbox_task(box, name=unique("charge_v1"), **options)
    def charge_v1(invoice_id: str, amount: int) -> str:
        ran.append("v1")
        return f"{invoice_id}:{amount}"

    assert charge_v1.apply(args=("inv-9", 100)).get() == "inv-9:100"

    @inbox_task(box, name=unique("charge_v2"), **options)
    def charge_v2(invoice_id: str, amount: int, currency: str = "EUR") -> str:
        ran.append("v2")
        return f"{invoice_id}:{amount}{currency}"

    assert charge_v2.apply(args=("inv-9", 100)).get() == "inv-9:100"
    assert charge_v2.apply(kwargs={"invoice_id": "inv-9", "amount": 100}).get() == "inv-9:100"
    assert ran == ["v1"]
    assert box.quarantined() == []
    # A value other than the default is another payload: refused, as before.
    charge_v2.apply(args=("inv-9", 100, "USD"))
    assert [r.reason for r in box.quarantined()] == ["payload_mismatch"]
    assert ran == ["v1"]


def test_g26_dramatiq_a_new_defaulted_parameter_keeps_a_redelivery_a_duplicate(
    box: inboxguard.Inbox,
) -> None:
    """The same rolling deploy of a Dramatiq actor: the old broker's version 1,
    then a new broker's version 2 under the same consumer."""
    ran: list[str] = []
    consumer = unique("billing")

    def deploy(version: int) -> Any:
        broker = StubBroker()
        broker.add_middleware(InboxMiddleware(box, session_factory=sessionmaker(box.engine)))
        if version == 1:

            def charge(invoice_id: str, amount: int) -> str:
                ran.append("v1")
                return f"{invoice_id}:{amount}"
        else:

            def charge(invoice_id: str, amount: int, currency: str = "EUR") -> str:  # type: ignore[misc]
                ran.append("v2")
                return f"{invoice_id}:{amount}{currency}"

        actor = dramatiq.actor(
            charge, broker=broker, inbox_command_id="invoice_id", inbox_consumer=consumer
        )
        return broker, actor

    old_broker, v1 = deploy(1)
    try:
        assert v1("inv-9", 100) == "inv-9:100"
    finally:
        old_broker.close()
    new_broker, v2 = deploy(2)
    try:
        assert v2("inv-9", 100) == "inv-9:100"
        assert v2(invoice_id="inv-9", amount=100, currency="EUR") == "inv-9:100"
    finally:
        new_broker.close()
    assert ran == ["v1"]
    assert box.quarantined() == []
