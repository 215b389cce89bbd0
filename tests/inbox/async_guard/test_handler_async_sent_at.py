"""``Inbox.handler_async(sent_at=)`` refuses a stale replay as the sync
decorator does (here with a callable over the handler's arguments)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from inboxguard import BeyondRetentionError, QuarantineReason

from .conftest import AsyncSetup


def test_handler_async_quarantines_a_stale_message_without_running(setup: AsyncSetup) -> None:
    calls: list[str] = []

    @setup.inbox.handler_async(
        consumer="orders",
        command_id=lambda message: message["id"],
        sent_at=lambda message: dt.datetime.fromisoformat(message["sent"]),
        exclude=("kwargs.message.sent",),
    )
    async def ship(session: AsyncSession, message: dict[str, Any]) -> str:
        calls.append(message["id"])
        await session.execute(insert(setup.orders).values(command_id=message["id"]))
        return str(message["id"])

    now = setup.inbox.clock()
    stale = (now - setup.inbox.retention.horizon - dt.timedelta(hours=1)).isoformat()

    async def body() -> str:
        engine = setup.engine()
        try:
            sessions = async_sessionmaker(engine)
            async with sessions() as s, s.begin():
                fresh = await ship(s, {"id": "o1", "sent": now.isoformat()})
            with pytest.raises(BeyondRetentionError):
                async with sessions() as s, s.begin():
                    await ship(s, {"id": "o2", "sent": stale})
            return fresh
        finally:
            await engine.dispose()

    assert asyncio.run(body()) == "o1"
    assert calls == ["o1"]
    with setup.inbox.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(setup.orders)).scalar_one() == 1
    [record] = setup.inbox.quarantined("orders")
    assert record.reason == QuarantineReason.BEYOND_RETENTION
    assert record.command_id == "o2"
