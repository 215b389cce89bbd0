"""Shared fixtures: real databases and brokers, isolated per test.

A test that needs a service skips with the reason when the service is down,
unless INBOXGUARD_REQUIRE_SERVICES=1 (CI), where it fails instead. Services
keep state between runs, so each test session creates its own PostgreSQL and
MariaDB databases (dropped at the end) and each test its own table prefix,
queue names and key prefixes.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

import inboxguard

#: The suite opts in to the testing kit's fixtures (users' projects must opt in too).
pytest_plugins = ["inboxguard.testing"]

REQUIRE = os.environ.get("INBOXGUARD_REQUIRE_SERVICES") == "1"
PG_ADMIN_URL = os.environ.get("INBOXGUARD_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432")
MYSQL_ADMIN_URL = os.environ.get("INBOXGUARD_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306")
REDIS_URL = os.environ.get("INBOXGUARD_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("INBOXGUARD_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
PORTS = {"postgresql": 5432, "mysql": 3306, "redis": 6379, "rabbitmq": 5672, "nats": 4222}
RUN_ID = uuid.uuid4().hex[:8]
#: INBOXGUARD_FULL_SCALE=1 runs the end-to-end suites at the issues' sizes
#: (1,000 duplicated commands per broker, 10,000 outbox orders on one of them).
FULL_SCALE = os.environ.get("INBOXGUARD_FULL_SCALE") == "1"
#: Commands of each duplicated-publishing end-to-end test (each sent 2-3 times).
#: A few hundred put as many copies through the claim at once as a thousand do:
#: the workers' concurrency bounds the race, not the length of the queue.
DUPLICATED_COMMANDS = 1000 if FULL_SCALE else 300


def service_up(name: str) -> bool:
    """True when the service's port accepts a TCP connection."""
    try:
        with socket.create_connection(("127.0.0.1", PORTS[name]), timeout=1):
            return True
    except OSError:
        return False


def require_service(name: str) -> None:
    """Skip (or, in CI, fail) the calling test when ``name`` is down."""
    if service_up(name):
        return
    reason = (
        f"{name} is not reachable on 127.0.0.1:{PORTS[name]}; start it with scripts/services.sh"
    )
    if REQUIRE:
        pytest.fail(f"INBOXGUARD_REQUIRE_SERVICES=1 and {reason}")
    pytest.skip(reason)


def unique(prefix: str = "t") -> str:
    """A short name no other test or run uses."""
    return f"{prefix}{RUN_ID}{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """URL of a PostgreSQL database created for this test session."""
    require_service("postgresql")
    name = f"ig_{RUN_ID}"
    admin = create_engine(f"{PG_ADMIN_URL}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield f"{PG_ADMIN_URL}/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def mysql_url() -> Iterator[str]:
    """URL of a MariaDB database created for this test session."""
    require_service("mysql")
    name = f"ig_{RUN_ID}"
    admin = create_engine(f"{MYSQL_ADMIN_URL}/")
    with admin.begin() as conn:
        conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    yield f"{MYSQL_ADMIN_URL}/{name}"
    with admin.begin() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS `{name}`"))
    admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: object) -> str:
    """URL of a fresh SQLite file."""
    return f"sqlite:///{tmp_path}/inbox.db"


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each supported database in turn."""
    fixture = {"sqlite": "sqlite_url", "postgresql": "pg_url", "mysql": "mysql_url"}[request.param]
    return str(request.getfixturevalue(fixture))


@pytest.fixture
def one_connection(pg_url: str) -> Iterator[Engine]:
    """A PostgreSQL engine of exactly one connection (what ``tests.adapters.wire`` traces)."""
    engine = create_engine(pg_url, pool_size=1, max_overflow=0)
    yield engine
    engine.dispose()


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine on each supported database."""
    eng = create_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def prefix() -> str:
    """A table prefix of this test's own."""
    return unique("t") + "_"


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self.now = start or dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def advance(self, delta: dt.timedelta) -> None:
        self.now += delta


@pytest.fixture
def clock() -> FakeClock:
    """A controllable clock."""
    return FakeClock()


@pytest.fixture
def inbox(engine: Engine, prefix: str) -> Iterator[inboxguard.Inbox]:
    """An inbox with its own tables on each supported database."""
    box = inboxguard.Inbox(engine, retention=dt.timedelta(days=30), table_prefix=prefix)
    box.create_schema()
    yield box
    box.drop_schema()
