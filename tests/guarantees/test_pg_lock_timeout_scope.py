"""PostgreSQL: the claim bounds its own lock wait and leaves the caller's
``lock_timeout`` as it found it, on every path of the claim: ``guard``, and
``guard_batch`` with one command, which takes the same statements."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox
from tests.helpers import wait_until

pytestmark = pytest.mark.postgresql


@pytest.fixture(params=["direct", "sqlalchemy"])
def pg(pg_url: str, request: pytest.FixtureRequest) -> Iterator[Engine]:
    """An engine whose claims go to the DBAPI cursor (``direct``), and one with a
    tenant-style ``schema_translate_map``, which SQLAlchemy executes."""
    engine = create_engine(pg_url)
    if request.param == "sqlalchemy":
        engine = engine.execution_options(schema_translate_map={None: "public"})
    yield engine
    engine.dispose()


#: Claim one command on a session; yields whether it was a duplicate.
Claim = Callable[[Inbox, Session, str], AbstractContextManager[bool]]


@contextmanager
def _guard(box: Inbox, session: Session, command_id: str) -> Iterator[bool]:
    with box.guard(session, consumer="c", command_id=command_id, payload={}) as entry:
        yield entry.duplicate


@contextmanager
def _batch_of_one(box: Inbox, session: Session, command_id: str) -> Iterator[bool]:
    with box.guard_batch(session, consumer="c", commands=[(command_id, {})]) as batch:
        [entry] = batch
        assert entry.error is None
        yield entry.duplicate


@pytest.fixture(params=["guard", "guard_batch of one"])
def claim(request: pytest.FixtureRequest) -> Claim:
    """Each way one command is claimed."""
    return _guard if request.param == "guard" else _batch_of_one


def _box(engine: Engine, prefix: str) -> Inbox:
    box = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(seconds=5),
    )
    box.create_schema()
    return box


def _lock_timeout(session: Session) -> str:
    return str(session.execute(text("SHOW lock_timeout")).scalar_one())


def test_fresh_and_duplicate_claims_keep_the_callers_setting(
    pg: Engine, prefix: str, claim: Claim
) -> None:
    box = _box(pg, prefix)
    for expect_duplicate in (False, True):
        with Session(pg) as session, session.begin():
            session.execute(text("SET LOCAL lock_timeout = '42s'"))
            with claim(box, session, "a") as duplicate:
                assert duplicate is expect_duplicate
                assert _lock_timeout(session) == "42s"
            assert _lock_timeout(session) == "42s"
    with Session(pg) as session, session.begin():
        with claim(box, session, "b"):
            assert _lock_timeout(session) == "0"  # the server default, untouched


def test_a_claim_that_waited_and_lost_the_race_keeps_the_callers_setting(
    pg: Engine, prefix: str, claim: Claim
) -> None:
    """The waiter's statement began before the holder committed, so its
    snapshot misses the row: the claim's second, lost-race read."""
    box = _box(pg, prefix)
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with Session(pg) as session, session.begin():
            with box.guard(session, consumer="c", command_id="x", payload={}):
                holding.set()
                release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert holding.wait(10)

    def waiting() -> bool:
        with pg.connect() as conn:
            query = (
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return bool(conn.execute(text(query)).scalar_one())

    def release_when_waiting() -> None:
        wait_until(waiting, timeout=10)
        release.set()

    releaser = threading.Thread(target=release_when_waiting)
    releaser.start()
    with Session(pg) as session, session.begin():
        session.execute(text("SET LOCAL lock_timeout = '42s'"))
        with claim(box, session, "x") as duplicate:
            assert duplicate
            assert _lock_timeout(session) == "42s"
    releaser.join()
    thread.join()
