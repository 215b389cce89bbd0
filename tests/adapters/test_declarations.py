"""Declarations every adapter refuses before a message arrives (issue 20):
misdeclared Celery tasks, acks on failure turned back on, and one consumer
name on two different handlers (Celery, Dramatiq, kombu, aio-pika)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import dramatiq
import pytest
from celery import Celery
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters import aio_pika as aio_pika_adapter
from inboxguard.adapters import kombu as kombu_adapter
from inboxguard.adapters.celery import InboxTask
from inboxguard.adapters.celery._options import check_acks
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.errors import ConfigurationError
from tests.conftest import unique


@pytest.fixture
def box(sqlite_url: str) -> Iterator[inboxguard.Inbox]:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix="d_")
    inbox.create_schema()
    yield inbox
    engine.dispose()


def _app() -> Celery:
    return Celery(unique("app"), broker="memory://", set_as_current=False)


def _declare(app: Celery, box: inboxguard.Inbox, **options: Any) -> Any:
    @app.task(
        base=InboxTask,
        inbox=box,
        inbox_session_factory=sessionmaker(box.engine),
        shared=False,  # a shared task would join every app made later in this process
        **options,
    )
    def apply_ref(ref: str) -> None:
        return None

    app.finalize()
    return app.tasks[options["name"]]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"inbox_comand_id": "ref"}, "inbox_comand_id"),
        ({"inbox_command_id": "reference"}, "names no argument"),
    ],
)
def test_a_misdeclared_base_inbox_task_fails_when_declared(
    box: inboxguard.Inbox, options: dict[str, Any], named: str
) -> None:
    """A misspelled inbox option or a command ID naming no argument raises when
    Celery makes the task, never at the first delivery."""
    with pytest.raises(ConfigurationError, match=named):
        _declare(_app(), box, name=unique("t"), **options)


def test_acks_on_failure_or_timeout_is_refused_unless_accepted(
    box: inboxguard.Inbox,
) -> None:
    """Guarded tasks default to not acking failures or timeouts; turning it back
    on fails the declaration (and the worker's start-up check) unless the loss
    is accepted. (The check is called per task here: ``check_worker`` on a test
    app would also see the shared tasks other tests declared; C11 runs it in a
    real worker.)"""
    plain = _declare(_app(), box, name=unique("t"), inbox_command_id="ref")
    assert (plain.acks_on_failure_or_timeout, plain.acks_on_timeout) == (False, False)
    check_acks(plain)
    with pytest.raises(ConfigurationError, match="inbox_accept_ack_on_failure=True"):
        _declare(
            _app(), box, name=unique("t"), inbox_command_id="ref", acks_on_failure_or_timeout=True
        )
    accepted = _declare(
        _app(),
        box,
        name=unique("t"),
        inbox_command_id="ref",
        acks_on_failure_or_timeout=True,
        inbox_accept_ack_on_failure=True,
    )
    check_acks(accepted)


def test_celery_one_consumer_name_on_two_tasks_is_refused_unless_shared(
    box: inboxguard.Inbox,
) -> None:
    """``reserve_stock`` and ``ship`` under one consumer name would skip every
    ``ship`` as a duplicate of ``reserve_stock``: refused when the second is made."""
    app = _app()
    _declare(app, box, name="reserve_stock", inbox_command_id="ref", inbox_consumer="orders")
    with pytest.raises(ConfigurationError, match="already used by 'reserve_stock'"):
        _declare(app, box, name="ship", inbox_command_id="ref", inbox_consumer="orders")
    for name in ("reserve_two", "ship_two"):
        _declare(
            _app(),
            box,
            name=name,
            inbox_command_id="ref",
            inbox_consumer="shared-orders",
            inbox_shared_consumer=True,
        )


def test_dramatiq_one_consumer_name_on_two_actors_is_refused_unless_shared(
    box: inboxguard.Inbox,
) -> None:
    broker = StubBroker()
    broker.add_middleware(InboxMiddleware(box, session_factory=sessionmaker(box.engine)))

    @dramatiq.actor(broker=broker, inbox_command_id="ref", inbox_consumer="orders")
    def reserve_stock(ref: str) -> None:
        return None

    with pytest.raises(ConfigurationError, match="already used by 'reserve_stock'"):

        @dramatiq.actor(broker=broker, inbox_command_id="ref", inbox_consumer="orders")
        def ship(ref: str) -> None:
            return None

    for name in ("reserve_two", "ship_two"):
        dramatiq.actor(
            lambda ref: None,
            actor_name=name,
            broker=broker,
            inbox_command_id="ref",
            inbox_consumer="shared-orders",
            inbox_shared_consumer=True,
        )
    broker.close()


def test_kombu_and_aio_pika_one_consumer_name_on_two_handlers_is_refused(
    box: inboxguard.Inbox,
) -> None:
    factory = sessionmaker(box.engine)

    def reserve_stock(body: Any, message: Any) -> None:
        return None

    def ship(body: Any, message: Any) -> None:
        return None

    kombu_adapter.guarded(
        reserve_stock, box, session_factory=factory, command_id="id", consumer="kb"
    )
    kombu_adapter.guarded(  # the same handler again: a second queue, say
        reserve_stock, box, session_factory=factory, command_id="id", consumer="kb"
    )
    with pytest.raises(ConfigurationError, match="shared_consumer=True"):
        kombu_adapter.guarded(ship, box, session_factory=factory, command_id="id", consumer="kb")

    async def charge(body: Any, message: Any) -> None:
        return None

    async def refund(body: Any, message: Any) -> None:
        return None

    options: dict[str, Any] = {
        "session_factory": factory,
        "command_id": "id",
        "consumer": "ap",
        "exchange": SimpleNamespace(name=""),  # a default-exchange stand-in
        "shared_consumer": True,
    }
    aio_pika_adapter.guarded(charge, box, **options)
    aio_pika_adapter.guarded(refund, box, **options)
    with pytest.raises(ConfigurationError, match="already used"):
        aio_pika_adapter.guarded(ship, box, **{**options, "shared_consumer": False})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"retry_on_worker_lost": True}, "retry_on_worker_lost=True"),
        ({"reject_on_worker_lost": False}, "inbox_accept_ack_on_worker_lost=True"),
        ({"acks_late": False}, "inbox_accept_early_ack=True"),
        ({"acks_late": "yes"}, "acks_late='yes': not a value the Celery adapter knows"),
        ({"reject_on_worker_lost": None}, "use True"),
    ],
)
def test_c19_c20_a_settlement_setting_not_known_to_be_safe_fails_when_declared(
    box: inboxguard.Inbox, options: dict[str, Any], named: str
) -> None:
    """Every setting of the Celery settlement table is read at declaration: a
    value the table refuses, or one it does not know, raises naming the safe
    values (and the opt-in, where there is one)."""
    with pytest.raises(ConfigurationError, match=re.escape(named)):
        _declare(_app(), box, name=unique("t"), inbox_command_id="ref", **options)
