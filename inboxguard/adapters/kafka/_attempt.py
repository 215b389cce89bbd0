"""One record through the guard: read it, run its transaction, judge the end.

A Kafka partition is a log, not a queue: a record cannot be put back behind
the others, and publishing a copy would reorder it among its key's records.
So a failed attempt is retried in place, ``retry_delay`` later, holding the
partition (the order of its records is kept), up to ``max_attempts``; a
refusal, or the last failed attempt, is quarantined, sent to the dead-letter
topic when one is named, and only then is its offset committed. The
attempt count lives in the worker: a worker killed mid-retry starts the
count again, so a record may get more attempts than ``max_attempts``, never
fewer.

:class:`Reader` turns a record into a :class:`Prepared` command (or an
unusable one) and :meth:`Reader.attempt` runs one attempt to the step the
shared redelivery policy decides; ``_settle`` performs it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard import Inbox, QuarantineReason
from inboxguard._core import headers as _headers
from inboxguard.adapters._evidence import Refused, command_id_of, record_refusal_async
from inboxguard.adapters._outcome import Outcome
from inboxguard.adapters._redelivery import Redelivery, Step
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.adapters.kafka._record import (
    RecordId,
    details_of,
    headers_of,
    id_of,
    position_of,
    sent_time_of,
)

__all__ = ["Prepared", "Reader"]

logger = logging.getLogger("inboxguard.kafka")

_STAMP = (
    "publish it through the outbox (it stamps x-inbox-sent-at), or produce it with a"
    " CreateTime timestamp (the producer's default) or an x-inbox-sent-at header"
)

#: ``apply(prepared, attempt)``: run one attempt's transaction; raise to fail it.
Apply = Callable[["Prepared", int], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A record read for the guard: its decoded body and headers, its command
    ID and sent time, what a quarantine record keeps of it (``refused``), or
    ``error`` when it has no usable body, ID or time."""

    record: Any
    body: Any
    headers: dict[str, Any]
    command_id: str | None
    sent_at: dt.datetime | None
    refused: Refused
    error: Exception | None = None

    @property
    def details(self) -> Mapping[str, Any]:
        """The record's quarantine details."""
        return self.refused.details


class Reader:
    """How one guarded consumer reads, retries and refuses its records."""

    def __init__(
        self,
        inbox: Inbox,
        name: str,
        *,
        command_id: RecordId,
        session_factory: Callable[[], AsyncSession],
        exclude: Iterable[str],
        policy: Redelivery,
        decode: Callable[[bytes], Any] = json.loads,
        require_sent_at: bool = False,
    ) -> None:
        self.inbox = inbox
        self.name = name
        self.get_id = id_of(command_id)
        self.session_factory = session_factory
        self.exclude = tuple(exclude)
        self.policy = policy
        self.decode = decode
        self.sent_check = SentTimeCheck(
            name, require=require_sent_at, stamp=_STAMP, option="require_sent_at", logger=logger
        )

    def prepare(self, record: Any, attempt: int = 1) -> Prepared:
        """Read ``record``; an unusable one carries its ``error``."""
        headers = headers_of(record)
        key = position_of(record)
        raw = {"body": _text(record.value), "headers": headers}
        refused = Refused(self.name, None, key, raw, (), raw)
        try:
            body = self.decode(record.value)
            details = details_of(record, body, headers, attempt)
            cid = command_id_of(self.get_id, record, body, headers)
            refused = Refused(self.name, cid, key, body, self.exclude, details)
            sent_at = self.sent_check(sent_time_of(record, headers))
        except Exception as bad:
            return Prepared(record, raw, headers, None, None, refused, bad)
        return Prepared(record, body, headers, cid, sent_at, refused)

    async def attempt(self, prepared: Prepared, number: int, apply: Apply) -> Step:
        """One attempt: the step it ends with."""
        attempt = self.policy.receive({_headers.ATTEMPT: number}, self.name)
        if prepared.error is not None:
            outcome = attempt.unusable().recorded(
                await self.record(prepared.error, prepared.refused, None)
            )
            key = prepared.refused.message_id or "?"
            return attempt.settle(outcome, prepared.error, key, prepared.body)
        assert prepared.command_id is not None  # a usable record has one
        try:
            await apply(prepared, number)
        except Exception as error:
            outcome = attempt.judge(error)
            if outcome.needs_record:
                written = await self.record(error, prepared.refused, _reason(outcome))
                outcome = outcome.recorded(written)
            return attempt.settle(outcome, error, prepared.command_id, prepared.details)
        return Step.ACK

    async def record(self, error: BaseException, refused: Refused, reason: str | None) -> bool:
        """Whether a quarantine record now holds the record (written through the
        session factory's engine, in a transaction of its own)."""
        try:
            async with self.session_factory() as session:
                engine = (await session.connection()).engine
        except Exception:
            return False
        return await record_refusal_async(self.inbox, engine, error, refused, reason)


def _reason(outcome: Outcome) -> str | None:
    return QuarantineReason.RETRIES_EXHAUSTED if outcome.exhausted else None


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)
