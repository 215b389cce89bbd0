"""G16: on MariaDB/MySQL, a connection that is not utf8mb4 is refused before
anything is written, because ``INSERT IGNORE`` would hide the lossy conversion
(``ticket-😀`` stored as ``ticket-????``) and skip a different command as its
duplicate."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from inboxguard import ConfigurationError, Inbox, Outbox


@pytest.fixture
def utf8mb3(mysql_url: str) -> Iterator[Engine]:
    """A real engine whose connections use utf8mb3."""
    engine = create_engine(f"{mysql_url}?charset=utf8mb3")
    yield engine
    engine.dispose()


def _refused() -> pytest.RaisesContext[ConfigurationError]:
    return pytest.raises(ConfigurationError, match=r"'utf8mb3'.*\?charset=utf8mb4")


def test_g16_utf8mb3_connection_is_refused(utf8mb3: Engine, prefix: str) -> None:
    """The guard, the watermark and the outbox refuse it; nothing is stored."""
    inbox = Inbox(utf8mb3, retention=dt.timedelta(days=1), table_prefix=prefix)
    outbox = Outbox(utf8mb3, table_prefix=prefix)
    inbox.create_schema()
    outbox.create_schema()
    try:
        with utf8mb3.connect() as conn, conn.begin():
            with _refused(), inbox.guard(conn, consumer="c", command_id="ticket-😀", payload={}):
                pytest.fail("the block must not run")
        with utf8mb3.connect() as conn, conn.begin(), _refused():
            inbox.advance_watermark(conn, consumer="c", key="ticket-😀", position=1)
        with utf8mb3.connect() as conn, conn.begin(), _refused():
            outbox.add(conn, command_id="ticket-😀", destination="q", payload={})
        assert inbox.lookup("c", "ticket-????") is None
        assert outbox.status().backlog == 0
    finally:
        inbox.drop_schema()
        outbox.drop_schema()


def test_g16_utf8mb4_keeps_the_two_commands_apart(mysql_url: str, prefix: str) -> None:
    """With utf8mb4 (SQLAlchemy's default for PyMySQL), both are fresh commands."""
    engine = create_engine(f"{mysql_url}?charset=utf8mb4")
    inbox = Inbox(engine, retention=dt.timedelta(days=1), table_prefix=prefix)
    inbox.create_schema()
    try:
        for command_id in ("ticket-😀", "ticket-????"):
            with engine.connect() as conn, conn.begin():
                with inbox.guard(conn, consumer="c", command_id=command_id, payload={}) as e:
                    assert not e.duplicate
        stored = inbox.lookup("c", "ticket-😀")
        assert stored is not None
        assert stored.command_id == "ticket-😀"
    finally:
        inbox.drop_schema()
        engine.dispose()
