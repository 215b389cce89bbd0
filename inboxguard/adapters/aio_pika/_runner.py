"""One aio-pika delivery's transaction (guard, awaited handler, commit) and
its quarantine record when it is refused."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aio_pika.abc import AbstractIncomingMessage
from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard import Inbox
from inboxguard.adapters._evidence import Refused, record_refusal_async
from inboxguard.adapters._outcome import log_duplicate
from inboxguard.adapters._transaction import transaction_async

__all__ = ["Handler", "Runner"]

logger = logging.getLogger("inboxguard.aio_pika")

Handler = Callable[[Any, AbstractIncomingMessage], Awaitable[Any]]


class Runner:
    """One delivery's transaction: guard, awaited handler, commit."""

    def __init__(
        self,
        handler: Handler,
        inbox: Inbox,
        session_factory: Callable[[], AsyncSession],
        consumer: str,
        exclude: tuple[str, ...],
    ) -> None:
        self.handler = handler
        self.inbox = inbox
        self.session_factory = session_factory
        self.consumer = consumer
        self.exclude = exclude

    async def __call__(
        self,
        body: Any,
        message: AbstractIncomingMessage,
        cid: str,
        sent_at: dt.datetime | None,
        details: Mapping[str, Any],
    ) -> None:
        async with (
            self.session_factory() as session,
            transaction_async(session, self.inbox, self.consumer, cid),
            self.inbox.guard_async(
                session,
                consumer=self.consumer,
                command_id=cid,
                payload=body,
                exclude=self.exclude,
                sent_at=sent_at,
                details=details,
            ) as entry,
        ):
            if entry.duplicate:
                log_duplicate(logger, self.consumer, cid, "the message")
            else:
                entry.result = await self.handler(body, message)

    async def record(self, error: Exception, refused: Refused, reason: str | None) -> bool:
        """Whether a quarantine record now holds the delivery (written through
        the session factory's own engine, in a transaction of its own)."""
        try:
            async with self.session_factory() as session:
                engine = (await session.connection()).engine
        except Exception:
            return False
        return await record_refusal_async(self.inbox, engine, error, refused, reason)
