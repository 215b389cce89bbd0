"""G4: two transactions racing for the same new command: exactly one applies."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, InProgressError
from tests.conftest import FULL_SCALE
from tests.guarantees.race_worker import amount_of
from tests.helpers import apply, count, create_business

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("race_worker.py")
#: Commands per process of the READ COMMITTED / REPEATABLE READ default races,
#: half shared by all 8: the 8 racing processes bound the contention, not the
#: length of the list (INBOXGUARD_FULL_SCALE=1 runs 500).
RACE_COMMANDS = 500 if FULL_SCALE else 200


def _race(url: str, prefix: str, workers: int, commands: int, isolation: str | None) -> None:
    engine = create_engine(url)
    box = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    _, ledger = create_business(engine, prefix)
    shared = commands // 2
    args = [str(commands), str(shared)] + ([isolation] if isolation else [])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, prefix, str(w), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(workers)
    ]
    for proc in procs:  # the start barrier: every worker is connected and waiting
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.communicate()[1][-3000:]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    # The workers really raced: some shared claims waited for another
    # transaction's claim, or lost to it and were retried.
    contention = sum(r["waited"] + r["retries"] for r in reports)
    assert contention > 0, reports
    expected_ids = {f"shared-{i}" for i in range(shared)} | {
        f"own{w}-{i}" for w in range(workers) for i in range(commands - shared)
    }
    # Every command applied exactly once: one ledger row per ID, and the sum matches.
    with engine.connect() as conn:
        rows = conn.execute(select(ledger.c.command_id)).scalars().all()
        total = conn.execute(select(func.sum(ledger.c.amount))).scalar_one()
    assert len(rows) == len(set(rows)) == len(expected_ids)
    assert set(rows) == expected_ids
    assert total == sum(amount_of(cid) for cid in expected_ids)
    assert sum(r["applied"] for r in reports) == len(expected_ids)
    assert sum(r["duplicates"] for r in reports) == workers * commands - len(expected_ids)
    assert count(engine, box.tables.inbox) == len(expected_ids)
    engine.dispose()


@pytest.mark.e2e
@pytest.mark.parametrize("isolation", [None, "REPEATABLE READ", "SERIALIZABLE"])
def test_g04_postgresql_processes_race(pg_url: str, prefix: str, isolation: str | None) -> None:
    """8 processes x 200 commands (500 at full scale), half shared: each applied
    once (READ COMMITTED); 4 x 200 under REPEATABLE READ and SERIALIZABLE, where
    lost races surface as retryable serialization failures."""
    workers, commands = (8, RACE_COMMANDS) if isolation is None else (4, 200)
    _race(pg_url, prefix, workers, commands, isolation)


@pytest.mark.e2e
@pytest.mark.parametrize("isolation", [None, "READ COMMITTED"])
def test_g04_mariadb_processes_race(mysql_url: str, prefix: str, isolation: str | None) -> None:
    """8 processes x 200 commands (500 at full scale) on MariaDB (REPEATABLE READ
    default); 4 x 200 under READ COMMITTED."""
    workers, commands = (8, RACE_COMMANDS) if isolation is None else (4, 200)
    _race(mysql_url, prefix, workers, commands, isolation)


def test_g04_sqlite_threads_race(sqlite_url: str, prefix: str) -> None:
    """SQLite serializes writers; 4 threads x 100 commands, half shared, each once."""
    engine = create_engine(sqlite_url)
    box = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    accounts, ledger = create_business(engine, prefix)
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        ids = [f"shared-{i}" for i in range(50)] + [f"own{w}-{i}" for i in range(50)]
        pending = list(reversed(ids)) if w % 2 else ids
        try:
            while pending:
                cid = pending.pop(0)
                try:
                    with Session(engine) as session, session.begin():
                        with box.guard(session, consumer="t", command_id=cid, payload={}) as e:
                            if not e.duplicate:
                                apply(session.connection(), accounts, ledger, cid, 1)
                except InProgressError:
                    pending.append(cid)
        except BaseException as error:  # pragma: no cover - surfaced below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors
    assert count(engine, ledger) == 50 + 4 * 50
    with engine.connect() as conn:
        assert conn.execute(select(accounts.c.balance)).scalar_one() == 250


def _two_transactions(engine: Engine, box: Inbox, second_rolls_back: bool) -> str:
    """Hold a claim open in one thread while a second transaction claims."""
    holding, release = threading.Event(), threading.Event()

    def first() -> None:
        with Session(engine) as session:
            with box.guard(session, consumer="c", command_id="x", payload={}):
                holding.set()
                release.wait(10)
            if second_rolls_back:
                session.rollback()
            else:
                session.commit()

    thread = threading.Thread(target=first)
    thread.start()
    holding.wait(10)
    threading.Timer(0.3, release.set).start()
    with Session(engine) as session, session.begin():
        with box.guard(session, consumer="c", command_id="x", payload={}) as entry:
            outcome = "duplicate" if entry.duplicate else "claimed"
    thread.join()
    return outcome


def test_g04_waiter_sees_duplicate_or_claims_after_rollback(engine: Engine, prefix: str) -> None:
    """A waiting claim becomes a duplicate when the holder commits, and claims
    the command when the holder rolls back."""
    box = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    assert _two_transactions(engine, box, second_rolls_back=True) == "claimed"
    prefix2 = prefix + "b"
    box2 = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix2)
    box2.create_schema()
    assert _two_transactions(engine, box2, second_rolls_back=False) == "duplicate"


# How long a waiter may take past lock_timeout before InProgressError, per
# database: PostgreSQL and SQLite honour milliseconds; MariaDB rounds the
# timeout up to whole seconds and its lock monitor checks about once a second.
WAIT_BOUNDS = {"postgresql": (0.3, 0.8), "sqlite": (0.3, 0.8), "mysql": (1.0, 2.5)}


def test_g04_lock_timeout_raises_in_progress(engine: Engine, prefix: str) -> None:
    """A claim held longer than lock_timeout makes the waiter raise InProgressError,
    after waiting lock_timeout (300 ms; MariaDB: rounded up to 1 s) and not much longer."""
    box = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        lock_timeout=dt.timedelta(milliseconds=300),
    )
    box.create_schema()
    low, high = WAIT_BOUNDS[engine.dialect.name]
    with Session(engine) as holder:
        with box.guard(holder, consumer="c", command_id="held", payload={}):
            pass
        started = time.monotonic()
        with pytest.raises(InProgressError) as caught, Session(engine) as session:
            with box.guard(session, consumer="c", command_id="held", payload={}):
                pass
        waited = time.monotonic() - started
        assert caught.value.retryable
        holder.rollback()
    assert low <= waited < high, f"waited {waited:.3f}s for a {low}s lock timeout"


def test_g04_repeatable_read_lost_race_is_retryable(pg_url: str, prefix: str) -> None:
    """Under REPEATABLE READ, a command committed after the snapshot was taken
    raises a retryable InProgressError, never a silent skip."""
    engine = create_engine(pg_url, isolation_level="REPEATABLE READ")
    box = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    box.create_schema()
    with Session(engine) as late:
        late.connection().exec_driver_sql("SELECT 1")  # the snapshot is taken here
        with Session(engine) as early, early.begin():
            with box.guard(early, consumer="c", command_id="rr", payload={}):
                pass
        with pytest.raises(InProgressError):
            with box.guard(late, consumer="c", command_id="rr", payload={}):
                pass
    engine.dispose()
