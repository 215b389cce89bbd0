"""OR10 and the declaration refusals of OR7: what a guarded Orch8 worker
refuses before it polls, and what guarded() refuses when it is called."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from orch8 import Orch8Client, WorkerTask
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard
from inboxguard import ConfigurationError, RetentionMisalignedError
from inboxguard.adapters.orch8 import InboxWorker, guarded
from inboxguard.testing.orch8 import StandInEngine

DAY = dt.timedelta(days=1)
MINUTE = dt.timedelta(minutes=1)


async def handler(task: WorkerTask) -> Any:
    return None


@pytest.fixture
def inbox(tmp_path: Any) -> inboxguard.Inbox:
    engine = create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7))
    inbox.create_schema()
    return inbox


def _guarded(inbox: inboxguard.Inbox, **options: Any) -> Any:
    factory = async_sessionmaker(create_async_engine("sqlite+aiosqlite://"))
    settings: dict[str, Any] = {
        "consumer": "c",
        "session_factory": factory,
        "retry_window": DAY,
        "reaper_window": MINUTE,
    }
    return guarded(handler, inbox, **{**settings, **options})


def _refused_to_start(inbox: inboxguard.Inbox, error: type[Exception], **options: Any) -> str:
    """Start a worker; return the error's text, after checking nothing was polled."""

    async def scenario() -> str:
        with StandInEngine() as standin:
            standin.add_task("h")
            handlers = {"h": _guarded(inbox, **options.pop("guard", {}))}
            async with Orch8Client(standin.url) as client:
                worker = InboxWorker(client, "w", handlers, poll_interval=0.01, **options)
                with pytest.raises(error) as raised:
                    await asyncio.wait_for(worker.start(), 30)
            assert standin.calls[("poll", 200)] == 0
            return str(raised.value)

    return asyncio.run(scenario())


def test_or10_retry_window_beyond_the_horizon_refuses_to_start(inbox: inboxguard.Inbox) -> None:
    """OR10: a block retried for longer than the inbox keeps its evidence
    would let a late retry run the step again; the worker refuses to poll."""
    text = _refused_to_start(
        inbox, RetentionMisalignedError, guard={"retry_window": dt.timedelta(days=30)}
    )
    assert "orch8_retry_window" in text


def test_or10_reaper_window_beyond_the_horizon_refuses_to_start(inbox: inboxguard.Inbox) -> None:
    """OR10: the same for the reaper's timeout."""
    text = _refused_to_start(
        inbox, RetentionMisalignedError, guard={"reaper_window": dt.timedelta(days=8)}
    )
    assert "orch8_reaper_window" in text


def test_or10_heartbeats_slower_than_the_reaper_refuse_to_start(inbox: inboxguard.Inbox) -> None:
    """OR10: heartbeats no more often than the reaper's timeout would hand
    every running task to another worker."""
    text = _refused_to_start(inbox, ConfigurationError, heartbeat_interval=60.0)
    assert "heartbeat_interval" in text


def test_or10_missing_tables_refuse_to_start(tmp_path: Any) -> None:
    """OR10: a database without the inbox's tables."""
    bare = inboxguard.Inbox(
        create_engine(f"sqlite:///{tmp_path / 'bare.sqlite'}"), retention=dt.timedelta(days=7)
    )
    text = _refused_to_start(bare, ConfigurationError)
    assert "create_schema" in text


def test_or10_a_passing_check_says_which_window_is_closest(
    inbox: inboxguard.Inbox, caplog: pytest.LogCaptureFixture
) -> None:
    """OR10: the check passes quietly for windows inside the horizon, naming
    the closest one."""
    with StandInEngine() as standin:
        worker = InboxWorker(Orch8Client(standin.url), "w", {"h": _guarded(inbox)})
        with caplog.at_level("INFO", logger="inboxguard"):
            worker.check()
    assert "orch8_retry_window" in caplog.text


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"session_factory": None}, "exactly one of session_factory"),
        ({"sync_session_factory": object}, "exactly one of session_factory"),
        ({"repeats": True}, "command_id='idempotency_key'"),
        ({"command_id": 42}, "a callable over the task"),
        ({"command_id": ""}, "non-empty params key"),
        ({"retry_window": 5}, "retry_window must be a positive timedelta"),
        ({"reaper_window": dt.timedelta(0)}, "reaper_window must be a positive timedelta"),
    ],
)
def test_or7_a_handler_that_cannot_compute_its_id_is_refused(
    inbox: inboxguard.Inbox, options: dict[str, Any], named: str
) -> None:
    """OR7: guarded() refuses, when called, a handler that cannot keep the
    guarantees, naming the argument and the fix."""
    with pytest.raises(ConfigurationError) as raised:
        _guarded(inbox, **options)
    assert named in str(raised.value)


def test_two_handlers_cannot_share_a_consumer_by_accident(inbox: inboxguard.Inbox) -> None:
    """A second handler under the same consumer name would share its evidence."""
    _guarded(inbox)

    async def other(task: WorkerTask) -> Any:
        return None

    with pytest.raises(ConfigurationError, match="shared_consumer"):
        guarded(
            other,
            inbox,
            consumer="c",
            session_factory=async_sessionmaker(create_async_engine("sqlite+aiosqlite://")),
            retry_window=DAY,
            reaper_window=MINUTE,
        )
