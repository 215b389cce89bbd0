"""The Kafka verbs of a settled record: settle it, hold it in place, dead-letter it.

A partition is a log, not a queue: a retried record is never copied behind
the others (that would reorder its key's records). The copy the shared
steps ask for is this same record, attempted again in place ``retry_delay``
later with the copy's attempt number, holding the partition. A refused or
exhausted record is produced to the dead-letter topic (when one is named)
with its key, value and headers. After each step a record is either settled
(its offset may be committed) or held for its next attempt; the offsets
themselves are committed by the consumer, after every record they pass is
settled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aiokafka.errors import KafkaError

from inboxguard._core import headers as _headers
from inboxguard.adapters._delivery import attempt_of
from inboxguard.adapters._redelivery import Step
from inboxguard.adapters.kafka._attempt import Apply, Reader
from inboxguard.adapters.kafka._record import position_of

__all__ = ["VERBS", "Settler"]

logger = logging.getLogger("inboxguard.kafka")

#: ``await verb(settler, record)``: whether the record is settled (else held).
Verb = Callable[["Settler", Any], Awaitable[bool]]


class Settler:
    """How one guarded consumer settles its records, by :data:`VERBS`."""

    def __init__(self, reader: Reader, producer: Any, dead_letter_topic: str | None) -> None:
        self.reader = reader
        self.producer = producer
        self.dead_letter_topic = dead_letter_topic

    @property
    def delay(self) -> float:
        """Seconds between two attempts of a held record."""
        return self.reader.policy.delay

    async def settle(self, record: Any, apply: Apply) -> Step:
        """Attempt ``record`` until a step settles it; return that step (``ACK``:
        committed or a duplicate; ``REJECT`` or ``GIVE_UP``: held by a quarantine
        record and dead-lettered)."""
        number = 1
        while True:
            step = await self.reader.attempt(record, number, apply)
            if await self.perform(step, record):
                return step
            attempt = self.reader.policy.receive({_headers.ATTEMPT: number}, self.reader.name)
            number = attempt_of(attempt.copy_headers(step))

    async def perform(self, step: Step, record: Any) -> bool:
        """Do what ``step`` says with ``record``; whether it is now settled."""
        return await VERBS[step](self, record)

    async def dead_letter(self, record: Any) -> None:
        """Produce a refused record to the dead-letter topic (retried until the
        broker has it: its offset is not committed before)."""
        if self.dead_letter_topic is None:
            return
        headers = [*(record.headers or ()), ("x-inbox-source", position_of(record).encode())]
        while True:
            try:
                await self.producer.send_and_wait(
                    self.dead_letter_topic, record.value, key=record.key, headers=headers
                )
            except KafkaError:
                logger.exception("could not produce to %r; retrying", self.dead_letter_topic)
                await asyncio.sleep(self.delay or 1.0)
                continue
            return


async def _settled(settler: Settler, record: Any) -> bool:
    return True


async def _held(settler: Settler, record: Any) -> bool:
    await asyncio.sleep(settler.delay)
    return False


async def _dead_lettered(settler: Settler, record: Any) -> bool:
    await settler.dead_letter(record)
    return True


#: The Kafka verbs of each step: settled (its offset may be committed); held
#: in place and attempted again ``retry_delay`` later (the next attempt, or
#: this one again); produced to the dead-letter topic, then settled.
VERBS: Final[Mapping[Step, Verb]] = {
    Step.ACK: _settled,
    Step.RETRY: _held,
    Step.REQUEUE: _held,
    Step.REJECT: _dead_lettered,
    Step.GIVE_UP: _dead_lettered,
    # A failure path this consumer does not have (it retries every failure):
    # never reached, and dead-lettered like a refusal if it were.
    Step.FAIL: _dead_lettered,
}
