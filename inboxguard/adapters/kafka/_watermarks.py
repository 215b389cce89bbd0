"""Per-partition offsets kept as inbox watermarks, in the record's own transaction.

With ``watermarks=True`` the guarded consumer advances the watermark
``topic/partition`` of its consumer name to each record's offset inside the
transaction that applies it (:meth:`inboxguard.Inbox.advance_watermark`). The
database then knows how far it has applied each partition even when the
offset commit that follows never reaches the broker. The first records the
consumer polls from a partition after an assignment load its watermark:
those at or below it are skipped (and the consumer seeks past it), so the
records whose changes committed are not run through the guard again. The
command ID still decides: a producer's retry lands under a new offset and is
a duplicate by its ID.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from inboxguard import Inbox

if TYPE_CHECKING:
    from inboxguard.adapters.kafka.confluent import ConfluentConsumer

__all__ = ["Watermarks", "below", "key_of"]

logger = logging.getLogger("inboxguard.kafka")


def key_of(topic: str, partition: int) -> str:
    """The watermark key of a partition."""
    return f"{topic}/{partition}"


def below(records: Sequence[Any], held: Sequence[Any]) -> list[Any]:
    """The ``records`` below the first ``held`` record of their partition (a
    watermark must not pass a record that is not settled)."""
    first: dict[tuple[str, int], int] = {}
    for record in held:
        key = (record.topic, record.partition)
        first[key] = min(first.get(key, record.offset), record.offset)
    return [r for r in records if r.offset < first.get((r.topic, r.partition), r.offset + 1)]


class Watermarks:
    """The partitions' watermarks of one guarded consumer."""

    def __init__(
        self,
        inbox: Inbox,
        name: str,
        session_factory: Callable[[], AsyncSession],
        consumer: AIOKafkaConsumer | ConfluentConsumer,
    ) -> None:
        self.inbox = inbox
        self.name = name
        self.session_factory = session_factory
        self.consumer = consumer
        self._known: dict[TopicPartition, int] = {}

    async def advance(self, session: AsyncSession, records: Sequence[Any]) -> None:
        """Advance each partition's watermark to its last offset in ``records``,
        in ``session``'s transaction."""
        last: dict[str, int] = {}
        for record in records:
            key = key_of(record.topic, record.partition)
            last[key] = max(last.get(key, -1), record.offset)
        for key, offset in sorted(last.items()):
            await session.run_sync(self._advance, key, offset)

    def _advance(self, session: Session, key: str, offset: int) -> bool:
        return self.inbox.advance_watermark(session, consumer=self.name, key=key, position=offset)

    async def positions(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The stored watermark of each partition that has one."""
        table = self.inbox.watermarks
        keys = {key_of(tp.topic, tp.partition): tp for tp in partitions}
        if not keys:
            return {}
        async with self.session_factory() as session:
            rows = await session.execute(
                select(table.c.key, table.c.position).where(
                    table.c.consumer == self.name, table.c.key.in_(sorted(keys))
                )
            )
            return {keys[str(k)]: int(p) for k, p in rows}

    async def unseen(self, records: Sequence[Any]) -> list[Any]:
        """The records past their partition's watermark, in order.

        The first records of a partition since it was assigned load its
        watermark; a polled record at or below it was applied (or answered
        as a duplicate) in a committed transaction, so it is dropped, and
        when the whole poll of that partition is below the watermark the
        consumer seeks past it. The group's rebalance listener only forgets
        what it loaded, so the check runs in the consuming task itself, in
        order with the records it guards.
        """
        new = {TopicPartition(r.topic, r.partition) for r in records} - set(self._known)
        if new:
            loaded = await self.positions(sorted(new))
            for tp in new:
                self._known[tp] = loaded.get(tp, -1)
        kept = [r for r in records if r.offset > self._known[TopicPartition(r.topic, r.partition)]]
        dropped = len(records) - len(kept)
        if dropped:
            last: dict[TopicPartition, int] = {}
            for record in records:
                tp = TopicPartition(record.topic, record.partition)
                last[tp] = max(last.get(tp, -1), record.offset)
            for tp, offset in last.items():
                mark = self._known[tp]
                if offset < mark:
                    self.consumer.seek(tp, mark + 1)
            logger.info(
                "%s: %d records at or below their partition's watermark; skipped",
                self.name,
                dropped,
            )
        return kept

    def forget(self, partitions: Sequence[TopicPartition]) -> None:
        """Drop the loaded watermarks of ``partitions`` (assigned or revoked:
        another member may have moved them)."""
        for tp in partitions:
            self._known.pop(tp, None)

    def listener(self) -> ConsumerRebalanceListener:
        """The rebalance listener that forgets the loaded watermarks."""
        return _Listener(self)


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, marks: Watermarks) -> None:
        self.marks = marks

    async def on_partitions_revoked(self, revoked: Any) -> None:
        # Nothing to flush: each offset is committed after its transaction.
        self.marks.forget(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.marks.forget(list(assigned))
