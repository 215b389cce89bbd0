"""The values of a batch claim: the commands going in, one entry per command
coming out, and the batch that holds them in input order."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from inboxguard.errors import CommandRejectedError, ConfigurationError

__all__ = ["BatchCommand", "BatchEntry", "InboxBatch", "batch_commands"]


@dataclass(frozen=True, slots=True)
class BatchCommand:
    """One command of a batch for :meth:`inboxguard.Inbox.guard_batch`.

    ``command_id`` and ``payload`` are what :meth:`~inboxguard.Inbox.guard`
    takes; ``sent_at`` (the message's own timestamp) refuses this command
    alone when it is older than the evidence horizon; ``details`` goes into
    its quarantine record if it is refused. A plain ``(command_id, payload)``
    pair means ``BatchCommand(command_id, payload)``.
    """

    command_id: str
    payload: object
    sent_at: dt.datetime | None = None
    details: Mapping[str, Any] | None = None


class BatchEntry:
    """What the batch claim decided for one command, at its input position.

    Exactly one of ``fresh``, ``duplicate`` and ``refused`` is true:

    - ``fresh``: claimed in this transaction; apply the command and assign
      ``result`` if it has one (stored in the same transaction when the
      block exits normally);
    - ``duplicate``: committed before with the same payload (or an earlier
      entry of this batch with the same ID and payload); ``result`` is the
      stored result (for a repeat inside the batch, the earlier entry's);
    - ``refused``: ``error`` says why (:class:`~inboxguard.PayloadMismatchError`
      or :class:`~inboxguard.BeyondRetentionError`); the delivery was
      quarantined in a transaction of its own; dead-letter that message.

    ``quarantine_recorded`` is true only for a refused entry whose quarantine
    record was written. A refused entry without it was only logged (the
    quarantine table could not be written): do not acknowledge or
    dead-letter its message, let the broker deliver it again.
    """

    __slots__ = (
        "_released",
        "_result",
        "_result_set",
        "_source",
        "command_id",
        "consumer",
        "digest",
        "duplicate",
        "error",
        "index",
        "payload",
        "quarantine_recorded",
        "result_expired",
    )

    def __init__(  # noqa: PLR0913 - one keyword per decided field
        self,
        *,
        index: int,
        consumer: str,
        command_id: str,
        digest: str,
        payload: object,
        duplicate: bool = False,
        result: Any = None,
        result_expired: bool = False,
        error: CommandRejectedError | None = None,
        source: BatchEntry | None = None,
        quarantine_recorded: bool = False,
    ) -> None:
        self.index = index
        self.consumer = consumer
        self.command_id = command_id
        self.digest = digest
        self.payload = payload
        self.duplicate = duplicate
        self.result_expired = result_expired
        self.error = error
        self.quarantine_recorded = quarantine_recorded
        self._result = result
        self._result_set = False
        self._released = False
        self._source = source

    @property
    def fresh(self) -> bool:
        """Claimed by this transaction: apply it."""
        return not self.duplicate and self.error is None

    @property
    def refused(self) -> bool:
        """Refused and quarantined: do not apply it; dead-letter its message."""
        return self.error is not None

    @property
    def released(self) -> bool:
        """Given back with :meth:`release`: its evidence is deleted at the block's exit."""
        return self._released

    def release(self) -> None:
        """Give this fresh command back without failing the batch: its
        evidence row is deleted at the block's normal exit, in the same
        transaction (no result is stored), so its next delivery is fresh.

        Undo the command's own changes first (run them in a savepoint), and
        do not acknowledge its message: it must be delivered again.

        Raises:
            AttributeError: the entry is not fresh.
        """
        if not self.fresh:
            msg = (
                f"entry {self.index} ({self.command_id!r}) is {self.outcome}:"
                " only a fresh entry can be released"
            )
            raise AttributeError(msg)
        self._released = True

    @property
    def outcome(self) -> str:
        """``"fresh"``, ``"duplicate"`` or ``"refused"``."""
        if self.error is not None:
            return "refused"
        return "duplicate" if self.duplicate else "fresh"

    @property
    def result(self) -> Any:
        """The stored result (duplicate) or the one assigned in the block (fresh)."""
        if self._source is not None:
            return self._source.result
        return self._result

    @result.setter
    def result(self, value: Any) -> None:
        if not self.fresh:
            msg = (
                f"entry {self.index} ({self.command_id!r}) is {self.outcome}: only a fresh"
                " entry's result can be assigned"
            )
            raise AttributeError(msg)
        self._result = value
        self._result_set = True

    def __repr__(self) -> str:
        """Show the position, identity and decision."""
        return f"<BatchEntry {self.index} {self.outcome} {self.consumer}/{self.command_id}>"


class InboxBatch(Sequence[BatchEntry]):
    """The entries of one :meth:`~inboxguard.Inbox.guard_batch`, one per
    command, in input order (``batch[i]`` is the i-th command's)."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Sequence[BatchEntry]) -> None:
        self._entries = tuple(entries)

    @overload
    def __getitem__(self, index: int) -> BatchEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[BatchEntry]: ...
    def __getitem__(self, index: int | slice) -> BatchEntry | Sequence[BatchEntry]:
        return self._entries[index]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[BatchEntry]:
        return iter(self._entries)

    @property
    def fresh(self) -> list[BatchEntry]:
        """The entries to apply, in input order."""
        return [e for e in self._entries if e.fresh]

    @property
    def duplicates(self) -> list[BatchEntry]:
        """The entries already applied, in input order."""
        return [e for e in self._entries if e.duplicate]

    @property
    def refused(self) -> list[BatchEntry]:
        """The refused (quarantined) entries, in input order."""
        return [e for e in self._entries if e.refused]

    def __repr__(self) -> str:
        """Count the outcomes."""
        counts = f"{len(self.fresh)} fresh, {len(self.duplicates)} duplicate"
        return f"<InboxBatch {len(self)} entries: {counts}, {len(self.refused)} refused>"


_SHAPE = (
    "commands must be an iterable of (command_id, payload) pairs or BatchCommand objects,"
    " or a mapping of command_id to payload"
)


def batch_commands(commands: object) -> list[BatchCommand]:
    """The batch's commands, in order, from what the caller passed.

    Accepts a mapping ``{command_id: payload}``, or any iterable (list,
    tuple, generator) of :class:`BatchCommand` objects and ``(command_id,
    payload)`` pairs. Identities and payloads are judged later, per entry.

    Raises:
        ConfigurationError: ``commands`` (or one element, named by its
            index) has another shape.
    """
    if isinstance(commands, Mapping):
        return [BatchCommand(cid, payload) for cid, payload in commands.items()]
    if isinstance(commands, str | bytes | bytearray) or not isinstance(commands, Iterable):
        msg = f"{_SHAPE}; got {type(commands).__name__}"
        raise ConfigurationError(msg)
    return [_one(i, item) for i, item in enumerate(commands)]


def _one(index: int, item: object) -> BatchCommand:
    if isinstance(item, BatchCommand):
        return item
    if isinstance(item, tuple | list) and len(item) == 2:
        return BatchCommand(item[0], item[1])
    got = f"a {type(item).__name__} of {len(item)}" if isinstance(item, tuple | list) else None
    msg = (
        f"commands[{index}] must be a (command_id, payload) pair or a BatchCommand;"
        f" got {got or type(item).__name__}: wrap it as BatchCommand(command_id, payload,"
        " sent_at=..., details=...)"
    )
    raise ConfigurationError(msg)
