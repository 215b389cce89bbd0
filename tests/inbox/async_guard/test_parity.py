"""The sync and async guards run one flow, so they behave identically: same
errors in the same order, same quarantine records, same entries."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, async_sessionmaker
from sqlalchemy.orm import Session

from inboxguard import InboxEntry

from .conftest import AsyncSetup

#: A delivery: (session kind, command ID, payload, days before now it was sent).
Delivery = tuple[str, str, object, int | None]

SCENARIOS: dict[str, list[Delivery]] = {
    "fresh then duplicate": [("session", "c1", 1, None), ("session", "c1", 1, None)],
    "mismatch": [("session", "c1", 1, None), ("session", "c1", 2, None)],
    "stale": [("session", "c1", 1, 31)],
    "stale on a wrong object": [("wrong", "c1", 1, 31)],
    "stale on an AUTOCOMMIT connection": [("autocommit", "c1", 1, 31)],
    "bad sent_at on a wrong object": [("wrong", "c1", 1, -1)],
}

Outcome = tuple[str, object]


def _sent_at(setup: AsyncSetup, days: int | None) -> Any:
    if days is None:
        return None
    if days < 0:
        return dt.datetime(2026, 1, 1)  # naive: a configuration error
    return setup.inbox.clock() - dt.timedelta(days=days)


def _outcome_of(entry: InboxEntry) -> Outcome:
    return ("duplicate" if entry.duplicate else "fresh", entry.result)


def _run_sync(setup: AsyncSetup, consumer: str, deliveries: list[Delivery]) -> list[Outcome]:
    box, outcomes = setup.inbox, []
    for kind, command_id, payload, days in deliveries:
        try:
            with _sync_session(setup, kind) as session, session.begin():
                guard: AbstractContextManager[InboxEntry] = box.guard(
                    session,
                    consumer=consumer,
                    command_id=command_id,
                    payload=payload,
                    sent_at=_sent_at(setup, days),
                )
                with guard as entry:
                    if not entry.duplicate:
                        entry.result = {"payload": payload}
                outcomes.append(_outcome_of(entry))
        except Exception as error:
            outcomes.append(("raised", type(error).__name__))
    return outcomes


def _sync_session(setup: AsyncSetup, kind: str) -> Any:
    if kind == "session":
        return Session(setup.inbox.engine)
    if kind == "autocommit":
        return setup.inbox.engine.execution_options(isolation_level="AUTOCOMMIT").connect()
    return _Wrong()


def _run_async(setup: AsyncSetup, consumer: str, deliveries: list[Delivery]) -> list[Outcome]:
    async def main() -> list[Outcome]:
        engine, outcomes = setup.engine(), []
        try:
            for kind, command_id, payload, days in deliveries:
                try:
                    async with _async_session(engine, kind) as session, session.begin():
                        guard: AbstractAsyncContextManager[InboxEntry] = setup.inbox.guard_async(
                            session,
                            consumer=consumer,
                            command_id=command_id,
                            payload=payload,
                            sent_at=_sent_at(setup, days),
                        )
                        async with guard as entry:
                            if not entry.duplicate:
                                entry.result = {"payload": payload}
                    outcomes.append(_outcome_of(entry))
                except Exception as error:
                    outcomes.append(("raised", type(error).__name__))
        finally:
            await engine.dispose()
        return outcomes

    return asyncio.run(main())


def _async_session(engine: Any, kind: str) -> Any:
    if kind == "session":
        return async_sessionmaker(engine)()
    if kind == "autocommit":
        conn: AsyncConnection = engine.execution_options(isolation_level="AUTOCOMMIT").connect()
        return conn
    return _Wrong()


class _Wrong:
    """Not a session at all; opens and "begins" like one so the guard sees it."""

    def __enter__(self) -> _Wrong:
        return self

    async def __aenter__(self) -> _Wrong:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None

    def begin(self) -> _Wrong:
        return self


def _records(setup: AsyncSetup, consumer: str) -> list[tuple[str, str, int]]:
    return [
        (r.command_id, r.reason, r.occurrences)
        for r in setup.inbox.quarantined(consumer, status=None)
    ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_sync_and_async_guards_behave_identically(setup: AsyncSetup, scenario: str) -> None:
    """Each scenario gives the same outcomes and the same quarantine records
    through the sync and the async guard."""
    deliveries = SCENARIOS[scenario]
    run: dict[str, Callable[[AsyncSetup, str, list[Delivery]], list[Outcome]]] = {
        "sync": _run_sync,
        "async": _run_async,
    }
    outcomes = {name: drive(setup, f"p.{name}", deliveries) for name, drive in run.items()}
    assert outcomes["sync"] == outcomes["async"], scenario
    assert _records(setup, "p.sync") == _records(setup, "p.async"), scenario


def test_a_configuration_error_beats_a_stale_refusal(setup: AsyncSetup) -> None:
    """A stale message on a wrong session raises ConfigurationError and is not
    quarantined, through either guard."""
    stale: list[Delivery] = [("wrong", "c1", 1, 31), ("autocommit", "c2", 1, 31)]
    for drive in (_run_sync, _run_async):
        assert drive(setup, "p.order", stale) == [("raised", "ConfigurationError")] * 2
    assert _records(setup, "p.order") == []
