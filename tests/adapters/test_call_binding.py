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
