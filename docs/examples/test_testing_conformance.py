"""Hold a store to the inbox's contract: the conformance suite on SQLite.

Run it with `pytest`. The harness below is the whole adapter between the
suite and a store: an isolated store per test (a SQLite file from
`tmp_path`), its transaction, its guard, and the consumer's own write.
"""

from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.testing.conformance import (
    SHORT_LOCK_TIMEOUT,
    InboxStoreSuite,
    run_in_threads,
)


class SqliteHarness:
    """One store: an Inbox and the consumer's `applied` table, on one file."""

    name = "sqlite"

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.applied_rows = Table(
            "applied",
            MetaData(),
            Column("id", Integer, primary_key=True),
            Column("command_id", String(255)),
            Column("amount", Integer),
        )
        self.applied_rows.metadata.create_all(self.engine)
        self.first = self.inbox(retention=timedelta(days=1))

    def inbox(self, *, retention, clock=None) -> inboxguard.Inbox:
        box = inboxguard.Inbox(
            self.engine, retention=retention, lock_timeout=SHORT_LOCK_TIMEOUT, clock=clock
        )
        box.create_schema()
        return box

    @contextmanager
    def transaction(self):
        with Session(self.engine) as session, session.begin():
            yield session

    def guard(self, inbox, tx, *, consumer, command_id, payload, sent_at=None):
        return inbox.guard(
            tx, consumer=consumer, command_id=command_id, payload=payload, sent_at=sent_at
        )

    def guard_batch(self, inbox, tx, *, consumer, commands):
        return inbox.guard_batch(tx, consumer=consumer, commands=commands)

    def mutate(self, tx, command_id, amount):
        tx.execute(self.applied_rows.insert().values(command_id=command_id, amount=amount))

    def applied(self):
        with self.engine.connect() as conn:
            query = select(self.applied_rows.c.command_id).order_by(self.applied_rows.c.id)
            return list(conn.execute(query).scalars())

    def evidence(self, consumer, command_id):
        record = self.first.lookup(consumer, command_id)
        if record is None:
            return None
        return {"digest": record.digest, "result": record.result, "expires_at": record.expires_at}

    def quarantine(self, consumer, command_id):
        return [
            {"reason": r.reason, "incoming_digest": r.incoming_digest}
            for r in self.first.quarantine_records_of(consumer, command_id)
        ]

    def run_concurrently(self, n, fn):
        return run_in_threads(n, fn)


class TestSqliteStore(InboxStoreSuite):
    """Every conformance test, on this harness."""

    @pytest.fixture
    def store(self, tmp_path):
        harness = SqliteHarness(f"sqlite:///{tmp_path}/store.db")
        yield harness
        harness.engine.dispose()
