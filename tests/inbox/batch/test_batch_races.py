"""BT10-BT11: overlapping batches racing on PostgreSQL and MariaDB, and a
lock timeout inside a batch, on every database."""

from __future__ import annotations

import datetime as dt
import random
import threading
import time
from collections import deque

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.orm import Session

from inboxguard import Inbox, InProgressError, is_retryable
from tests.helpers import apply, business_tables, create_business
from tests.inbox.batch.conftest import Setup

WORKERS = 4
POOL = 60
SIZE = 10
HOLD = 0.02


def _worker(inbox: Inbox, url: str, w: int, start: threading.Barrier, report: dict) -> None:
    engine = create_engine(url, pool_size=2)
    _, accounts, ledger = business_tables(inbox.table_prefix)
    ids = [f"cmd-{i:02}" for i in range(POOL)]
    random.Random(w).shuffle(ids)
    queue = deque(ids[i : i + SIZE] for i in range(0, POOL, SIZE))
    fresh = duplicates = retries = waited = 0
    start.wait()
    try:
        while queue:
            batch_ids = queue.popleft()
            commands = [(cid, {"id": cid}) for cid in batch_ids]
            try:
                with Session(engine) as session, session.begin():
                    session.connection()
                    claiming = time.monotonic()
                    with inbox.guard_batch(session, consumer="race", commands=commands) as batch:
                        waited += time.monotonic() - claiming >= HOLD / 2
                        for entry in batch.fresh:
                            apply(session.connection(), accounts, ledger, entry.command_id, 1)
                            entry.result = w
                        time.sleep(HOLD)  # hold the claims open: widen the window
                fresh += len(batch.fresh)
                duplicates += len(batch.duplicates)
            except Exception as error:
                if not is_retryable(error):
                    raise
                retries += 1
                queue.append(batch_ids)
    finally:
        engine.dispose()
    report[w] = {"fresh": fresh, "duplicates": duplicates, "retries": retries, "waited": waited}


@pytest.mark.parametrize("database", ["postgresql", "mysql"])
def test_bt10_overlapping_batches_apply_each_command_once(
    request: pytest.FixtureRequest, database: str, prefix: str
) -> None:
    """4 workers claim the same 60 commands in batches of 10, each in its own
    order (overlapping batches): every command is applied exactly once (one
    ledger row each, the balance adds up), every other sighting is a
    duplicate, and no batch deadlocks on the evidence rows (keys sorted)."""
    url = str(request.getfixturevalue({"postgresql": "pg_url", "mysql": "mysql_url"}[database]))
    engine = create_engine(url)
    inbox = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(seconds=5),
    )
    inbox.create_schema()
    accounts, ledger = create_business(engine, prefix)
    start = threading.Barrier(WORKERS)
    report: dict[int, dict[str, int]] = {}
    threads = [
        threading.Thread(target=_worker, args=(inbox, url, w, start, report))
        for w in range(WORKERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(report) == WORKERS, "a worker failed; see the thread's traceback"
    with engine.connect() as conn:
        rows = conn.execute(select(ledger.c.command_id)).scalars().all()
        balance = conn.execute(select(accounts.c.balance)).scalar_one()
        evidence = conn.execute(select(func.count()).select_from(inbox.tables.inbox)).scalar()
    assert sorted(rows) == [f"cmd-{i:02}" for i in range(POOL)]
    assert balance == POOL
    assert evidence == POOL
    assert sum(r["fresh"] for r in report.values()) == POOL
    assert sum(r["duplicates"] for r in report.values()) == (WORKERS - 1) * POOL
    # The workers really raced: some batches waited for another's claims.
    assert sum(r["waited"] + r["retries"] for r in report.values()) > 0, report
    # Each worker's stored result names the worker that applied the command.
    winners = {inbox.lookup("race", f"cmd-{i:02}").result for i in range(POOL)}  # type: ignore[union-attr]
    assert winners <= set(range(WORKERS))
    inbox.drop_schema()
    accounts.metadata.drop_all(engine)
    engine.dispose()


@pytest.mark.parametrize("names", [("free", "held"), ("held",)], ids=["two", "one"])
def test_bt11_a_lock_timeout_refuses_the_whole_batch(setup: Setup, names: tuple[str, ...]) -> None:
    """A command of the batch held by another open transaction past
    ``lock_timeout``: the batch raises a retryable InProgressError and
    nothing of it commits; once the holder rolls back, the same batch claims
    every command. A batch of one takes the single claim on PostgreSQL."""
    s = setup
    commands = [(name, {}) for name in names]
    with Session(s.engine) as holder:
        with s.inbox.guard(holder, consumer="c", command_id="held", payload={}):
            pass
        started = time.monotonic()
        with pytest.raises(InProgressError) as raised, Session(s.engine) as session:
            with s.inbox.guard_batch(session, consumer="c", commands=commands):
                pytest.fail("the block must not run")
        assert raised.value.retryable
        assert time.monotonic() - started < 4
        holder.rollback()
    assert [s.inbox.lookup("c", name) for name in names] == [None] * len(names)
    with Session(s.engine) as session, session.begin():
        with s.inbox.guard_batch(session, consumer="c", commands=commands) as batch:
            assert [e.outcome for e in batch] == ["fresh"] * len(names)
    assert all(s.inbox.lookup("c", name) is not None for name in names)


def test_bt11_postgresql_lock_timeout_is_put_back(pg_url: str, prefix: str) -> None:
    """On PostgreSQL the batch bounds its own wait and leaves the caller's
    ``lock_timeout`` as it found it, in the same transaction."""
    engine = create_engine(pg_url)
    inbox = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=300),
    )
    inbox.create_schema()
    try:
        for commands in ([("a", {}), ("b", {})], [("a", {}), ("c", {})]):
            with Session(engine) as session, session.begin():
                session.execute(text("SET LOCAL lock_timeout = '7s'"))
                with inbox.guard_batch(session, consumer="c", commands=commands):
                    assert session.execute(text("SHOW lock_timeout")).scalar() == "7s"
    finally:
        inbox.drop_schema()
        engine.dispose()
