"""G25: a statement timeout that ends a contended claim is retryable.

The caller's own statement bound (PostgreSQL ``statement_timeout``, MariaDB
``max_statement_time``) shorter than the guard's ``lock_timeout`` cancels the
claim while it waits for another transaction's claim. That is the same
situation as a lock timeout: the guard raises ``InProgressError``, which
``is_retryable()`` and the adapters retry, and the command is applied once
when the other transaction finishes.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, InProgressError, is_retryable
from tests.helpers import apply, count, create_business

#: The statement bound each database's session takes (the claim waits longer
#: for its lock than this).
_BOUND = {
    "postgresql": "SET LOCAL statement_timeout = '300ms'",
    "mysql": "SET SESSION max_statement_time = 0.3",
}


@pytest.fixture(params=["postgresql", "mysql"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Engine]]:
    """PostgreSQL and MariaDB, each with a statement bound of 300 ms."""
    url = str(
        request.getfixturevalue({"postgresql": "pg_url", "mysql": "mysql_url"}[request.param])
    )
    engine = create_engine(url)
    yield request.param, engine
    engine.dispose()


def test_a_statement_timeout_while_the_claim_waits_is_in_progress(
    server: tuple[str, Engine], prefix: str
) -> None:
    name, engine = server
    box = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(seconds=10),
    )
    box.create_schema()
    accounts, ledger = create_business(engine, prefix)
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with Session(engine) as session, session.begin():
            with box.guard(session, consumer="c", command_id="x", payload={"n": 1}):
                apply(session.connection(), accounts, ledger, "x", 1)
                holding.set()
                release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert holding.wait(30)
        with pytest.raises(InProgressError) as caught:
            with Session(engine) as session, session.begin():
                session.execute(text(_BOUND[name]))
                with box.guard(session, consumer="c", command_id="x", payload={"n": 1}):
                    apply(session.connection(), accounts, ledger, "x", 1)
        assert is_retryable(caught.value)
        assert caught.value.retryable is True
    finally:
        release.set()
        thread.join()
    # The redelivery after the holder committed is a duplicate: applied once.
    with Session(engine) as session, session.begin():
        with box.guard(session, consumer="c", command_id="x", payload={"n": 1}) as entry:
            assert entry.duplicate
    assert count(engine, ledger) == 1
    box.drop_schema()
