"""The SQL stores: the SQLAlchemy :class:`inboxguard.Inbox` on SQLite,
PostgreSQL and MariaDB, each with a table prefix of its own."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, RetentionPolicy
from inboxguard._core.clock import Clock
from inboxguard.testing.conformance import SHORT_LOCK_TIMEOUT, run_in_threads
from tests.conftest import unique

__all__ = ["SqlStore", "sql_store"]


class SqlStore:
    """An :class:`inboxguard.Inbox` and a ledger table on one database."""

    def __init__(self, name: str, engine: Engine, prefix: str) -> None:
        self.name = name
        self.engine = engine
        self.prefix = prefix
        self.metadata = MetaData()
        self.ledger = Table(
            f"{prefix}ledger",
            self.metadata,
            Column("id", Integer, primary_key=True, autoincrement=True),
            Column("command_id", String(255), nullable=False),
            Column("amount", Integer, nullable=False),
        )
        self.metadata.create_all(engine)
        self._inboxes: list[Inbox] = []

    def inbox(self, *, retention: RetentionPolicy, clock: Clock | None = None) -> Inbox:
        """An inbox on this store's tables (created on first use)."""
        box = Inbox(
            self.engine,
            retention=retention,
            table_prefix=self.prefix,
            lock_timeout=SHORT_LOCK_TIMEOUT,
            clock=clock,
        )
        box.create_schema()
        self._inboxes.append(box)
        return box

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A Session inside session.begin()."""
        with Session(self.engine) as session, session.begin():
            yield session

    def guard(
        self,
        inbox: Inbox,
        tx: Session,
        *,
        consumer: str,
        command_id: str,
        payload: Any,
        sent_at: dt.datetime | None = None,
    ) -> Any:
        """``Inbox.guard`` on the session."""
        return inbox.guard(
            tx, consumer=consumer, command_id=command_id, payload=payload, sent_at=sent_at
        )

    def guard_batch(
        self, inbox: Inbox, tx: Session, *, consumer: str, commands: list[tuple[str, Any]]
    ) -> Any:
        """``guard_batch`` on the transaction (refused where the store says so)."""
        return inbox.guard_batch(tx, consumer=consumer, commands=commands)

    def mutate(self, tx: Session, command_id: str, amount: int) -> None:
        """Insert a ledger row in the session's transaction."""
        tx.execute(self.ledger.insert().values(command_id=command_id, amount=amount))

    def applied(self) -> list[str]:
        """The committed ledger rows' command IDs, in insertion order."""
        with self.engine.connect() as conn:
            query = select(self.ledger.c.command_id).order_by(self.ledger.c.id)
            return list(conn.execute(query).scalars())

    def evidence(self, consumer: str, command_id: str) -> dict[str, Any] | None:
        """The committed inbox row, as a dict."""
        record = self._any_inbox().lookup(consumer, command_id)
        if record is None:
            return None
        return {"digest": record.digest, "result": record.result, "expires_at": record.expires_at}

    def quarantine(self, consumer: str, command_id: str) -> list[dict[str, Any]]:
        """Every quarantine record of the command, whatever its status."""
        return [
            {
                "reason": r.reason,
                "incoming_digest": r.incoming_digest,
                "stored_digest": r.stored_digest,
                "occurrences": r.occurrences,
            }
            for r in self._any_inbox().quarantined(consumer, status=None)
            if r.command_id == command_id
        ]

    def run_concurrently(self, n: int, fn: Callable[[], Any]) -> list[Any | BaseException]:
        """Threads, each with its own Session from the engine's pool."""
        return run_in_threads(n, fn)

    def _any_inbox(self) -> Inbox:
        if self._inboxes:
            return self._inboxes[0]
        return self.inbox(retention=RetentionPolicy(dead_letter_replay=dt.timedelta(days=1)))

    def drop(self) -> None:
        """Drop the inbox's and the ledger's tables."""
        self._any_inbox().drop_schema()
        self.metadata.drop_all(self.engine)


_URL_FIXTURES = {"sqlite": "sqlite_url", "postgresql": "pg_url", "mysql": "mysql_url"}


def sql_store(database: str) -> Callable[[pytest.FixtureRequest], Any]:
    """The factory of the SQL store on ``database`` (sqlite, postgresql, mysql)."""

    @contextmanager
    def factory(request: pytest.FixtureRequest) -> Iterator[SqlStore]:
        # The URL fixtures call require_service for the server databases.
        url = str(request.getfixturevalue(_URL_FIXTURES[database]))
        engine = create_engine(url)
        store = SqlStore(f"sql-{database}", engine, unique("s") + "_")
        try:
            yield store
        finally:
            store.drop()
            engine.dispose()

    return factory
