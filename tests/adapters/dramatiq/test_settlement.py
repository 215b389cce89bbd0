"""Dramatiq settlement: a database outage with ``max_retries=0`` (D17) and the
settlement table read at worker boot (D18, D20), which does what the
rendered table says (D21),
on Dramatiq's StubBroker and a real PostgreSQL behind a TCP proxy that the
test cuts (every connection refused, the quarantine write included)."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from dramatiq import Retry, Worker
from dramatiq.brokers.stub import StubBroker
from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
    make_url,
    select,
)
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.dramatiq import InboxMiddleware
from inboxguard.errors import ConfigurationError, RetentionMisalignedError
from tests.outbox._proxy import TcpProxy

from .test_middleware import Spy

pytestmark = pytest.mark.postgresql
QUEUE = "default"
DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[TcpProxy, str]]:
    url = make_url(pg_url)
    proxy = TcpProxy(url.port or 5432)
    proxy.start()
    yield proxy, url.set(port=proxy.port).render_as_string(hide_password=False)
    proxy.cut()


def test_d17_max_retries_zero_during_an_outage_never_dead_letters_without_a_record(
    proxied: tuple[TcpProxy, str], prefix: str
) -> None:
    """``max_retries=0`` (what the adapter's own errors suggest) while the
    database is unreachable: the transient failure cannot be quarantined, so
    the message must come back, not be failed into the dead-letter queue;
    once the database is back the command is applied once."""
    _outage_applies_once(proxied, prefix, max_retries=0)


def _give_up_after_one(retries: int, error: Exception) -> bool:
    return retries <= 1


@pytest.mark.parametrize(
    "options",
    [{"max_retries": 1}, {"retry_when": _give_up_after_one}],
    ids=["max_retries=1", "retry_when"],
)
def test_d20_every_accepted_retry_setting_survives_an_outage(
    proxied: tuple[TcpProxy, str], prefix: str, options: dict[str, Any]
) -> None:
    """The other retry settings the Dramatiq table accepts, under the same
    outage: the smallest limit, and a ``retry_when`` that gives up after one
    retry. Each message comes back (never dead-lettered without a record) and
    is applied once the database is back."""
    _outage_applies_once(proxied, prefix, **options)


def test_d20_unbounded_retries_are_refused_before_the_first_delivery(
    sqlite_url: str, prefix: str
) -> None:
    """``max_retries=None`` never reaches a delivery: its retry schedule has no
    end, so the settlement table refuses it at boot, naming the safe values
    (before the retention check, which no evidence horizon would pass)."""
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=60), table_prefix=prefix)
    broker = StubBroker()
    middleware = InboxMiddleware(inbox, session_factory=sessionmaker(engine))
    broker.add_middleware(middleware)

    @dramatiq.actor(broker=broker, max_retries=None, inbox_command_id="order_id")
    def forever(order_id: str) -> None:
        return None

    with pytest.raises(ConfigurationError, match="max_retries=None") as refused:
        middleware.check_alignment(broker)
    assert not isinstance(refused.value, RetentionMisalignedError)
    assert "use >= 1, 0" in str(refused.value)
    broker.close()
    engine.dispose()


def _rendered_row(setting: str, value: str) -> tuple[str, str]:
    """The verdict and the why of one row of docs/adapters/dramatiq.md's
    settlement table, as a reader sees it."""
    page = DOCS.joinpath("adapters", "dramatiq.md").read_text()
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0] == f"`{setting}`" and cells[2] == f"`{value}`":
            return cells[3], cells[4]
    raise AssertionError(f"no row {setting}={value} on the page")


@pytest.mark.parametrize(
    ("max_retries", "row"), [(None, "None"), (3, ">= 1"), (0, "0")], ids=["None", "3", "0"]
)
def test_d21_the_boot_check_does_what_the_rendered_table_says(
    sqlite_url: str, prefix: str, max_retries: int | None, row: str
) -> None:
    """For each value of ``max_retries`` the page lists, the worker's boot
    check refuses it exactly when the rendered row says "refuses", with the
    row's own reason, and lets it start otherwise (evidence kept long enough
    for the schedule of any finite value here)."""
    verdict, why = _rendered_row("max_retries", row)
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=60), table_prefix=prefix)
    inbox.create_schema()
    broker = StubBroker()
    middleware = InboxMiddleware(inbox, session_factory=sessionmaker(engine))
    broker.add_middleware(middleware)

    @dramatiq.actor(broker=broker, max_retries=max_retries, inbox_command_id="order_id")
    def ship(order_id: str) -> None:
        return None

    try:
        if verdict == "refuses":
            with pytest.raises(ConfigurationError) as refused:
                middleware.before_worker_boot(broker, Worker(broker))
            assert f"max_retries={max_retries!r}: {why}" in str(refused.value)
        else:
            middleware.before_worker_boot(broker, Worker(broker))
    finally:
        broker.close()
        engine.dispose()


def _outage_applies_once(proxied: tuple[TcpProxy, str], prefix: str, **options: Any) -> None:
    """One command sent while the database is cut: at least three retries
    and no dead letter, then, with the database back, one effect row and no
    quarantine record."""
    proxy, url = proxied
    engine = create_engine(url, pool_pre_ping=True)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    effects = Table(
        f"{prefix}effects",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("order_id", String(40)),
    )
    effects.create(engine)
    broker = StubBroker()
    broker.emit_after("process_boot")
    spy = Spy()
    broker.add_middleware(spy)
    broker.add_middleware(
        InboxMiddleware(
            inbox, session_factory=sessionmaker(engine), busy_delay=dt.timedelta(milliseconds=20)
        )
    )

    @dramatiq.actor(broker=broker, min_backoff=10, inbox_command_id="order_id", **options)
    def apply(order_id: str) -> None:
        inboxguard.current_session().execute(insert(effects).values(order_id=order_id))

    worker = Worker(broker, worker_timeout=50, worker_threads=1)
    worker.start()
    try:
        engine.dispose()
        proxy.cut()
        apply.send("o-1")
        deadline = time.monotonic() + 30
        while sum(isinstance(e, Retry) for e in spy.exceptions) < 3 and not broker.dead_letters:
            assert time.monotonic() < deadline, f"no retries: {spy.exceptions}"
            time.sleep(0.05)
        assert broker.dead_letters == []
        proxy.start()
        broker.join(QUEUE)
        worker.join()
    finally:
        worker.stop()
        broker.close()
    with engine.connect() as conn:
        assert conn.execute(select(effects.c.order_id)).scalars().all() == ["o-1"]
    assert broker.dead_letters == []
    assert inbox.quarantined() == []
    effects.drop(engine)
    inbox.drop_schema()
    engine.dispose()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_age": 60_000}, "max_age=60000: AgeLimit fails an older message"),
        ({"max_retries": "3"}, "max_retries='3': not a value the Dramatiq adapter knows"),
    ],
    ids=["max_age", "unknown-value"],
)
def test_d18_an_actor_setting_not_known_to_be_safe_refuses_the_worker(
    sqlite_url: str, prefix: str, options: dict[str, Any], named: str
) -> None:
    """``max_age`` (AgeLimit dead-letters an old message before the guard sees
    it, with no record) and a value the table does not list are refused at
    worker boot, naming the safe values; the defaults are accepted."""
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=60), table_prefix=prefix)
    broker = StubBroker()
    middleware = InboxMiddleware(inbox, session_factory=sessionmaker(engine))
    broker.add_middleware(middleware)

    @dramatiq.actor(broker=broker, max_retries=3, max_backoff=1000, inbox_command_id="order_id")
    def plain(order_id: str) -> None:
        return None

    middleware.check_alignment(broker)  # the defaults pass

    @dramatiq.actor(broker=broker, max_backoff=1000, inbox_command_id="order_id", **options)
    def risky(order_id: str) -> None:
        return None

    with pytest.raises(ConfigurationError, match=re.escape(named)):
        middleware.check_alignment(broker)
    broker.close()
    engine.dispose()
