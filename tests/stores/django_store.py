"""The Django stores: :class:`inboxguard.django.DjangoInbox` inside
``transaction.atomic()`` on SQLite, PostgreSQL and MariaDB, each with a
table prefix of its own (Django configured by tests/django/support.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from inboxguard import RetentionPolicy
from inboxguard._core.clock import Clock
from inboxguard.testing.conformance import SHORT_LOCK_TIMEOUT, run_in_threads
from tests.conftest import unique
from tests.django.ledger import Ledger
from tests.django.support import add_alias, close_all, configure

__all__ = ["DjangoStore", "django_store"]


class DjangoStore:
    """A DjangoInbox and a ledger table on one Django database alias."""

    def __init__(self, name: str, alias: str, prefix: str) -> None:
        from inboxguard.django import DjangoInbox

        self.name = name
        self.alias = alias
        self.prefix = prefix
        self._first = DjangoInbox(
            database=alias, table_prefix=prefix, retention=dt.timedelta(days=1)
        )
        self._first.create_schema()
        self.ledger = Ledger(self._first.engine, prefix, alias)
        self._inboxes: list[Any] = []

    def inbox(self, *, retention: RetentionPolicy, clock: Clock | None = None) -> Any:
        """A DjangoInbox on this store's tables."""
        from inboxguard.django import DjangoInbox

        box = DjangoInbox(
            database=self.alias,
            table_prefix=self.prefix,
            retention=retention,
            lock_timeout=SHORT_LOCK_TIMEOUT,
            clock=clock,
            engine=self._first.engine,
        )
        self._inboxes.append(box)
        return box

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """``transaction.atomic(using=alias)``; the thread's Django connection is
        closed when a thread of its own ends it (see run_concurrently)."""
        from django.db import transaction

        with transaction.atomic(using=self.alias):
            yield self.alias

    def guard(
        self,
        inbox: Any,
        tx: Any,
        *,
        consumer: str,
        command_id: str,
        payload: Any,
        sent_at: dt.datetime | None = None,
    ) -> Any:
        """``DjangoInbox.guard`` in the current atomic() block."""
        return inbox.guard(
            consumer=consumer, command_id=command_id, payload=payload, sent_at=sent_at
        )

    def guard_batch(
        self, inbox: Any, tx: Any, *, consumer: str, commands: list[tuple[str, Any]]
    ) -> Any:
        """``guard_batch`` on the transaction (refused where the store says so)."""
        return inbox.guard_batch(tx, consumer=consumer, commands=commands)

    def mutate(self, tx: Any, command_id: str, amount: int) -> None:
        """Insert a ledger row on Django's connection."""
        self.ledger.mutate(command_id, amount)

    def applied(self) -> list[str]:
        """The committed ledger rows' command IDs, in insertion order."""
        return self.ledger.applied()

    def evidence(self, consumer: str, command_id: str) -> dict[str, Any] | None:
        """The committed inbox row, as a dict."""
        record = self._first.lookup(consumer, command_id)
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
            for r in self._first.quarantined(consumer, status=None)
            if r.command_id == command_id
        ]

    def run_concurrently(self, n: int, fn: Callable[[], Any]) -> list[Any | BaseException]:
        """Threads, each with its own Django connection (closed when it ends)."""

        def own_connection() -> Any:
            try:
                return fn()
            finally:
                close_all()

        return run_in_threads(n, own_connection)

    def drop(self) -> None:
        """Drop the store's and the ledger's tables."""
        self.ledger.drop()
        self._first.drop_schema()
        self._first.engine.dispose()


_URL_FIXTURES = {"postgresql": "pg_url", "mysql": "mysql_url"}


def django_store(database: str) -> Callable[[pytest.FixtureRequest], Any]:
    """The factory of the Django store on ``database`` (sqlite, postgresql, mysql)."""

    @contextmanager
    def factory(request: pytest.FixtureRequest) -> Iterator[DjangoStore]:
        configure()
        if database == "sqlite":
            alias = "default"
        else:  # the URL fixtures call require_service
            alias = add_alias(database, str(request.getfixturevalue(_URL_FIXTURES[database])))
        store = DjangoStore(f"django-{database}", alias, unique("j") + "_")
        try:
            yield store
        finally:
            close_all()
            store.drop()

    return factory
