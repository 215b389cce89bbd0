"""Mistakes the outbox refuses before they lose a command: pools that share
the caller's connection (O17), a second dispatcher on the same SQLite file
however its URL is spelt (O18), inboxguard's own headers (O3) and one
command ID addressed to two destinations (O2)."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from sqlalchemy.pool import QueuePool, StaticPool

import inboxguard
from inboxguard.sql.dialects.sqlite.dispatcher_lock import SqliteDispatcherLock
from tests.conftest import AMQP_URL, unique
from tests.outbox.helpers import Recorder


@pytest.mark.parametrize(
    ("url", "options"),
    [("sqlite://", {}), ("sqlite://", {"poolclass": StaticPool})],
    ids=["singleton-thread-pool", "static-pool"],
)
def test_o17_pools_that_share_one_connection_are_refused(url, options):
    engine = create_engine(url, **options)
    with pytest.raises(inboxguard.ConfigurationError, match="hands out the caller's own"):
        inboxguard.Outbox(engine)


def test_o18_a_symlink_to_the_same_file_gets_no_second_dispatcher(tmp_path, prefix):
    real = tmp_path / "shop.db"
    link = tmp_path / "link.db"
    first = create_engine(f"sqlite:///{real}")
    box = inboxguard.Outbox(first, table_prefix=prefix)
    box.create_schema()
    os.symlink(real, link)
    urls = [
        f"sqlite:///{link}",
        f"sqlite:///file:{real}?uri=true",
        f"sqlite:///file:{link}?uri=true",
    ]
    with inboxguard.Dispatcher(box, Recorder()) as dispatcher:
        assert dispatcher.run_once() == 0
        for url in urls:
            other = inboxguard.Outbox(create_engine(url), table_prefix=prefix)
            with pytest.raises(inboxguard.ConfigurationError, match="one dispatcher"):
                inboxguard.Dispatcher(other, Recorder()).run_once()
    for url in urls:  # free again, and a file: URI can run one
        other = inboxguard.Outbox(create_engine(url), table_prefix=prefix)
        with inboxguard.Dispatcher(other, Recorder()) as dispatcher:
            assert dispatcher.run_once() == 0


def test_o18_distinct_in_memory_databases_get_distinct_locks(prefix):
    def memory_box(name):
        url = f"sqlite:///file:{name}?mode=memory&cache=shared&uri=true"
        box = inboxguard.Outbox(create_engine(url, poolclass=QueuePool), table_prefix=prefix)
        box.create_schema()
        return box

    name_a, name_b = unique("mem"), unique("mem")
    a, b, a_again = memory_box(name_a), memory_box(name_b), memory_box(name_a)
    with (
        inboxguard.Dispatcher(a, Recorder()) as first,
        inboxguard.Dispatcher(b, Recorder()) as other,
    ):
        assert (first.run_once(), other.run_once()) == (0, 0)
        with pytest.raises(inboxguard.ConfigurationError, match="one dispatcher"):
            inboxguard.Dispatcher(a_again, Recorder()).run_once()
    one, two = (
        SqliteDispatcherLock(create_engine("sqlite://")),
        SqliteDispatcherLock(create_engine("sqlite://")),
    )
    one.acquire()
    two.acquire()  # two private in-memory databases: two locks
    one.release()
    two.release()


def add(box, session, **fields):
    values = {"command_id": "c-1", "destination": "q", "payload": {"n": 1}, **fields}
    return box.add(session, **values)


@pytest.fixture
def box(sqlite_url, prefix):
    engine = create_engine(sqlite_url)
    outbox = inboxguard.Outbox(engine, table_prefix=prefix)
    outbox.create_schema()
    yield outbox
    engine.dispose()


@pytest.mark.parametrize(
    "name", ["x-inbox-attempt", "x-inbox-retry-at", "X-Inbox-Anything", "x-inboxguard-sent-at"]
)
def test_o3_every_x_inbox_header_is_reserved(box, name):
    with Session(box.engine) as session, session.begin():
        with pytest.raises(inboxguard.PayloadEncodingError, match="reserved"):
            add(box, session, headers={name: "1", "trace": "t"})
    assert box.get("c-1") is None


def test_o2_the_same_command_for_another_destination_is_refused(box):
    with Session(box.engine) as session, session.begin():
        assert add(box, session)
    with Session(box.engine) as session, session.begin():
        assert not add(box, session)  # same destination: the documented no-op
        with pytest.raises(inboxguard.OutboxPayloadConflictError, match="destination 'q'"):
            add(box, session, destination="q-typo")
    assert box.get("c-1").destination == "q"


def test_o13_celery_and_dramatiq_transports_refuse_unconfirmed_rabbitmq():
    from celery import Celery
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    from inboxguard.adapters.celery.transport import CeleryTransport
    from inboxguard.adapters.dramatiq.transport import DramatiqTransport

    app = Celery("producer", broker=AMQP_URL)
    with pytest.raises(inboxguard.ConfigurationError, match="confirm_publish"):
        CeleryTransport(app)
    app.conf.broker_transport_options = {"confirm_publish": True}
    CeleryTransport(app)
    with pytest.raises(inboxguard.ConfigurationError, match="confirm_delivery=True"):
        DramatiqTransport(RabbitmqBroker(url="amqp://guest:guest@127.0.0.1:5672/%2F"))
