"""The decisions the sync and async guards share, checked from both sides, and the
adapters' framework-free delivery helpers."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import (
    BeyondRetentionError,
    ConfigurationError,
    InvalidCommandError,
    PayloadMismatchError,
    QuarantineReason,
)
from inboxguard.adapters import _delivery
from inboxguard.inbox._flow import Connect, GuardFlows, WriteQuarantine

from .conftest import AsyncSetup


def test_the_flow_decides_before_any_io_and_asks_to_connect_first(setup: AsyncSetup) -> None:
    """Validation, the digest and the stale verdict need no I/O; the first request
    is to check the session, and a stale delivery's next one is its quarantine."""
    box = setup.inbox
    flows = GuardFlows(box.tables, box.retention, box.clock, box.lock_timeout)
    old = box.clock() - dt.timedelta(days=31)
    flow = flows.guard("orders", "c1", {"a": 1}, (), old, {"k": 1})
    assert isinstance(next(flow), Connect)
    refusal = flow.send(box.engine.dialect)
    assert isinstance(refusal, WriteQuarantine)
    assert refusal.values["reason"] == QuarantineReason.BEYOND_RETENTION
    assert refusal.values["incoming_digest"] == inboxguard.digest_of({"a": 1})
    with pytest.raises(BeyondRetentionError):
        flow.send(True)
    assert box.quarantined() == []


def test_sync_guard_still_quarantines_mismatch_and_stale(setup: AsyncSetup) -> None:
    box = setup.inbox
    with (
        Session(box.engine) as s,
        s.begin(),
        box.guard(s, consumer="orders", command_id="c1", payload=1) as entry,
    ):
        s.execute(insert(setup.orders).values(command_id="c1"))
        assert not entry.duplicate
    with pytest.raises(PayloadMismatchError), Session(box.engine) as s, s.begin():
        box.guard(s, consumer="orders", command_id="c1", payload=2).__enter__()
    old = box.clock() - dt.timedelta(days=31)
    with pytest.raises(BeyondRetentionError), Session(box.engine) as s, s.begin():
        box.guard(s, consumer="orders", command_id="c2", payload=1, sent_at=old).__enter__()
    reasons = sorted(r.reason for r in box.quarantined("orders"))
    assert reasons == [QuarantineReason.BEYOND_RETENTION, QuarantineReason.PAYLOAD_MISMATCH]


def test_an_inbox_on_a_sync_engine_serves_guard_async_and_sync_engine_is_refused(
    setup: AsyncSetup,
) -> None:
    """Changed by issue 19: ``Inbox(async_engine.sync_engine)`` used to be
    accepted, and ``lookup()`` then failed with SQLAlchemy's ``MissingGreenlet``;
    it is refused at construction, naming a sync driver. An Inbox on a sync
    Engine of the same database serves ``guard_async``."""
    refused = create_async_engine(setup.aurl)
    with pytest.raises(ConfigurationError, match=r"separate sync Engine.*sync driver"):
        inboxguard.Inbox(refused.sync_engine, retention=dt.timedelta(days=30))
    asyncio.run(refused.dispose())

    async def main() -> tuple[bool, bool]:
        engine = create_async_engine(setup.aurl)
        try:
            box = setup.inbox
            async with engine.begin() as conn:
                await conn.run_sync(box.tables.metadata.create_all)  # idempotent
            outcomes = []
            for payload in (1, 1):
                async with (
                    async_sessionmaker(engine)() as s,
                    s.begin(),
                    box.guard_async(
                        s, consumer="orders", command_id="c1", payload=payload
                    ) as entry,
                ):
                    outcomes.append(entry.duplicate)
            async with async_sessionmaker(engine)() as s:
                with pytest.raises(PayloadMismatchError):
                    async with box.guard_async(s, consumer="orders", command_id="c1", payload=2):
                        pass
            return outcomes[0], outcomes[1]
        finally:
            await engine.dispose()

    assert asyncio.run(main()) == (False, True)
    [record] = setup.inbox.quarantined("orders")
    assert record.reason == QuarantineReason.PAYLOAD_MISMATCH


def test_delivery_helpers_parse_headers_and_refuse_bad_input() -> None:
    assert _delivery.attempt_of({}) == 1
    assert _delivery.attempt_of({_delivery.ATTEMPT_HEADER: "3"}) == 3
    assert _delivery.attempt_of({_delivery.ATTEMPT_HEADER: "x"}) == 1
    assert _delivery.seconds_until_due({_delivery.RETRY_AT_HEADER: 1e12}, 0.5) == 0.5
    assert _delivery.seconds_until_due({}, 0.5) == 0.0
    naive = dt.datetime(2026, 1, 1)
    assert _delivery.parse_sent_at(naive) == naive.replace(tzinfo=dt.UTC)
    assert _delivery.parse_sent_at(0) == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    assert _delivery.parse_sent_at(b"2026-01-01T00:00:00+00:00") == naive.replace(tzinfo=dt.UTC)
    with pytest.raises(InvalidCommandError, match="x-inbox-sent-at"):
        _delivery.parse_sent_at("yesterday")
    get = _delivery.id_getter("order_id")
    assert get(_delivery.Delivery({"order_id": 7})) == "7"
    with pytest.raises(InvalidCommandError, match="'order_id' key"):
        get(_delivery.Delivery({"other": 1}))
    with pytest.raises(ConfigurationError, match="max_attempts"):
        _delivery.check_retry_policy(0, dt.timedelta(seconds=1))
    with pytest.raises(ConfigurationError, match="retry_delay"):
        _delivery.check_retry_policy(3, dt.timedelta(seconds=-1))
