"""The pytest side of the kit: an option and the ``inboxguard_*`` fixtures.

Loaded only when a project opts in (``-p inboxguard.testing`` or
``pytest_plugins = ["inboxguard.testing"]``); installing inboxguard
registers no entry point, so other projects' test runs never load it.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.engine import URL, Engine

from inboxguard._core.retention import RetentionPolicy
from inboxguard.effects import EffectLedger
from inboxguard.inbox import Inbox
from inboxguard.outbox import Outbox
from inboxguard.testing._cases import FaultKit
from inboxguard.testing._clock import ManualClock
from inboxguard.testing._provider import FakeProvider

__all__ = [
    "inboxguard_clock",
    "inboxguard_database",
    "inboxguard_inbox",
    "inboxguard_kit",
    "inboxguard_ledger",
    "inboxguard_outbox",
    "inboxguard_provider",
    "pytest_addoption",
    "server_url",
]

#: The environment variable naming the database server (like ``--inboxguard-db``).
DB_ENV = "INBOXGUARD_TEST_DB"
#: Evidence kept by the fixture's inbox: a week of redelivery and replay.
RETENTION = dt.timedelta(days=7)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--inboxguard-db URL``."""
    parser.getgroup("inboxguard").addoption(
        "--inboxguard-db",
        metavar="URL",
        default=None,
        help=(
            "SQLAlchemy URL of a PostgreSQL or MariaDB/MySQL server on which each test gets"
            f" a database of its own (created and dropped); default: ${DB_ENV}, else SQLite"
            " in the test's temporary directory"
        ),
    )


def server_url(config: pytest.Config) -> str | None:
    """The server named by ``--inboxguard-db``, else ``INBOXGUARD_TEST_DB``, else None."""
    given: str | None = config.getoption("--inboxguard-db") or os.environ.get(DB_ENV)
    return given or None


@pytest.fixture
def inboxguard_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A SQLAlchemy ``Engine`` on a throwaway database: SQLite in ``tmp_path``,
    or a database created (and dropped afterwards) on the server of
    ``--inboxguard-db`` / ``INBOXGUARD_TEST_DB``."""
    server = server_url(request.config)
    if not server:
        engine = create_engine(f"sqlite:///{tmp_path / 'inboxguard.db'}")
        yield engine
        engine.dispose()
        return
    with _throwaway(make_url(server)) as url:
        engine = create_engine(url)
        try:
            yield engine
        finally:
            engine.dispose()


class _throwaway:  # noqa: N801 - used as a context manager, like contextlib's
    """Create a database named for one test on ``server``; drop it on exit."""

    def __init__(self, server: URL) -> None:
        backend = server.get_backend_name()
        if backend not in ("postgresql", "mysql", "mariadb"):
            msg = (
                f"--inboxguard-db / {DB_ENV} must name a PostgreSQL or MariaDB/MySQL server,"
                f" got {backend!r}; leave it unset for SQLite"
            )
            raise pytest.UsageError(msg)
        self.pg = backend == "postgresql"
        self.name = f"ig_test_{uuid.uuid4().hex[:12]}"
        admin_db = (server.database or "postgres") if self.pg else None
        self.admin = create_engine(server.set(database=admin_db), isolation_level="AUTOCOMMIT")
        self.url = server.set(database=self.name)

    def __enter__(self) -> URL:
        suffix = "" if self.pg else " CHARACTER SET utf8mb4"
        with self.admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {self._quoted()}{suffix}"))
        return self.url

    def __exit__(self, *_: object) -> None:
        force = " WITH (FORCE)" if self.pg else ""
        with self.admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {self._quoted()}{force}"))
        self.admin.dispose()

    def _quoted(self) -> str:
        return f'"{self.name}"' if self.pg else f"`{self.name}`"


@pytest.fixture
def inboxguard_clock() -> ManualClock:
    """A :class:`ManualClock` shared by the inbox, ledger, outbox and provider fixtures."""
    return ManualClock()


@pytest.fixture
def inboxguard_inbox(inboxguard_database: Engine, inboxguard_clock: ManualClock) -> Inbox:
    """An :class:`~inboxguard.Inbox` on the test database, tables created, keeping
    evidence a week, on the test's clock."""
    inbox = Inbox(
        inboxguard_database, retention=RetentionPolicy(redelivery=RETENTION), clock=inboxguard_clock
    )
    inbox.create_schema()
    return inbox


@pytest.fixture
def inboxguard_ledger(inboxguard_database: Engine, inboxguard_clock: ManualClock) -> EffectLedger:
    """An :class:`~inboxguard.EffectLedger` on the test database, tables created."""
    ledger = EffectLedger(inboxguard_database, clock=inboxguard_clock, actor="inboxguard-test")
    ledger.create_schema()
    return ledger


@pytest.fixture
def inboxguard_outbox(inboxguard_database: Engine, inboxguard_clock: ManualClock) -> Outbox:
    """An :class:`~inboxguard.Outbox` on the test database, tables created."""
    outbox = Outbox(inboxguard_database, clock=inboxguard_clock)
    outbox.create_schema()
    return outbox


@pytest.fixture
def inboxguard_provider(inboxguard_clock: ManualClock) -> FakeProvider:
    """A :class:`FakeProvider` that accepts, with lookup, remembering keys 24 hours."""
    return FakeProvider(clock=inboxguard_clock)


@pytest.fixture
def inboxguard_kit(
    inboxguard_inbox: Inbox,
    inboxguard_ledger: EffectLedger,
    inboxguard_provider: FakeProvider,
    inboxguard_clock: ManualClock,
) -> FaultKit:
    """A :class:`FaultKit` wired to the other fixtures: the failure cases in one line."""
    return FaultKit(
        inboxguard_inbox,
        ledger=inboxguard_ledger,
        provider=inboxguard_provider,
        clock=inboxguard_clock,
    )
