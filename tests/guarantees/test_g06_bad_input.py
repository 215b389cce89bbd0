"""G6: bad input raises a clear error and writes nothing."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import (
    ConfigurationError,
    Inbox,
    InvalidCommandError,
    NoActiveGuardError,
    PayloadEncodingError,
    current_session,
)
from tests.helpers import count


@pytest.mark.parametrize(
    ("consumer", "command_id"),
    [("c", ""), ("c", None), ("c", 7), ("c", "x" * 256), ("c", "a\nb"), ("", "ok"), (" c", "ok")],
)
def test_g06_bad_identities_write_nothing(
    inbox: Inbox, engine: Engine, consumer: Any, command_id: Any
) -> None:
    """Empty, non-str, too long or control-character identities are refused;
    a missing ID never means 'skip deduplication'."""
    ran = []
    with pytest.raises(InvalidCommandError), Session(engine) as session, session.begin():
        with inbox.guard(session, consumer=consumer, command_id=command_id, payload={}):
            ran.append(1)
    assert ran == []
    assert count(engine, inbox.tables.inbox) == 0
    assert count(engine, inbox.tables.quarantine) == 0


def test_g06_unencodable_payload_writes_nothing(inbox: Inbox, engine: Engine) -> None:
    """A payload without a canonical encoding names the bad path; nothing is written."""
    with pytest.raises(PayloadEncodingError, match=r"payload\['when'\]"):
        with Session(engine) as session, session.begin():
            with inbox.guard(
                session,
                consumer="c",
                command_id="p",
                payload={"when": dt.datetime(2026, 1, 1)},
            ):
                pass
    assert count(engine, inbox.tables.inbox) == 0


def test_g06_unencodable_result_rolls_the_command_back(inbox: Inbox, engine: Engine) -> None:
    """A result that cannot be stored fails the block; the caller's rollback
    loses nothing, and the redelivery is processed as fresh."""
    with pytest.raises(PayloadEncodingError, match=r"result\['obj'\]"):
        with Session(engine) as session, session.begin():
            with inbox.guard(session, consumer="c", command_id="r", payload={}) as entry:
                entry.result = {"obj": object()}
    assert count(engine, inbox.tables.inbox) == 0
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="r", payload={}) as entry:
            assert not entry.duplicate


def test_g06_autocommit_connections_are_refused(inbox: Inbox, engine: Engine) -> None:
    """Without a transaction the claim could commit alone, so it is refused."""
    with engine.connect() as conn:
        auto = conn.execution_options(isolation_level="AUTOCOMMIT")
        with pytest.raises(ConfigurationError, match="AUTOCOMMIT"):
            with inbox.guard(auto, consumer="c", command_id="a", payload={}):
                pass
    assert count(engine, inbox.tables.inbox) == 0


def test_g06_wrong_session_type_is_refused(inbox: Inbox) -> None:
    """Passing something other than a Session or Connection says what to pass."""
    with pytest.raises(ConfigurationError, match="Session or Connection"):
        with inbox.guard(object(), consumer="c", command_id="a", payload={}):  # type: ignore[arg-type]
            pass


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"retention": 30}, "retention"),
        ({"retention": dt.timedelta(0)}, "positive"),
        ({"retention": dt.timedelta(days=1), "table_prefix": "bad-prefix"}, "table_prefix"),
        ({"retention": dt.timedelta(days=1), "lock_timeout": dt.timedelta(-1)}, "lock_timeout"),
        ({"retention": dt.timedelta(days=1), "clock": 5}, "clock"),
    ],
)
def test_g06_misconfiguration_fails_at_construction(
    engine: Engine, kwargs: dict[str, Any], words: str
) -> None:
    """Bad settings fail when the Inbox is built, naming the setting."""
    with pytest.raises(ConfigurationError, match=words):
        Inbox(engine, **kwargs)


def test_g06_naive_clock_is_refused(engine: Engine, prefix: str) -> None:
    """A clock returning naive datetimes is a configuration error at first use."""
    box = Inbox(
        engine,
        retention=dt.timedelta(days=1),
        table_prefix=prefix,
        clock=lambda: dt.datetime(2026, 1, 1),
    )
    with pytest.raises(ConfigurationError, match="timezone-aware"), Session(engine) as session:
        with box.guard(session, consumer="c", command_id="x", payload={}):
            pass


def test_g06_current_session_outside_a_guard_is_an_error() -> None:
    """current_session() outside a guard raises NoActiveGuardError (a LookupError)."""
    with pytest.raises(NoActiveGuardError):
        current_session()
    with pytest.raises(LookupError):
        current_session()
