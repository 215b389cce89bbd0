"""The values the operator read model returns: frozen, typed, times in UTC."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from inboxguard.effects import EffectRecord
from inboxguard.inbox import InboxRecord, QuarantineAction, QuarantineRecord, QuarantineReplay
from inboxguard.outbox import OutboxRow

__all__ = [
    "CommandExplanation",
    "ConsumerStats",
    "EffectStats",
    "OutboxStats",
    "QuarantineDetail",
    "Stats",
]


@dataclass(frozen=True, slots=True)
class ConsumerStats:
    """One consumer's inbox: ``processed`` evidence rows, ``quarantined`` open
    records, and the oldest evidence (``oldest_processed_at``, None without
    rows) with its age at the time of the reading."""

    consumer: str
    processed: int
    quarantined: int
    oldest_processed_at: dt.datetime | None
    oldest_evidence_age: dt.timedelta | None


@dataclass(frozen=True, slots=True)
class OutboxStats:
    """The outbox: ``backlog`` rows not yet delivered, the oldest of them
    (``oldest_unsent_at``, None without backlog) and its age, ``dead`` rows
    and ``delivered`` rows still kept."""

    backlog: int
    oldest_unsent_at: dt.datetime | None
    oldest_unsent_age: dt.timedelta | None
    dead: int
    delivered: int


@dataclass(frozen=True, slots=True)
class EffectStats:
    """The effect ledger: effects counted by state (every state present,
    zero included) and the oldest ``unknown`` one (last updated at
    ``oldest_unknown_at``, None without any) with its age."""

    by_state: dict[str, int]
    oldest_unknown_at: dt.datetime | None
    oldest_unknown_age: dt.timedelta | None


@dataclass(frozen=True, slots=True)
class Stats:
    """One reading of a database's inboxguard tables, taken ``at`` (UTC).

    A section is None when its tables do not exist at that prefix (an
    application without an outbox or a ledger), never an error. For a
    :class:`~inboxguard.RedisInbox`, ``table_prefix`` is its key prefix, the
    outbox and effects are None (they live in SQL), and ``durability`` is
    what the server reports (:meth:`~inboxguard.RedisInbox.durability`);
    it is None for a database.
    """

    at: dt.datetime
    table_prefix: str
    consumers: tuple[ConsumerStats, ...] | None
    outbox: OutboxStats | None
    effects: EffectStats | None
    durability: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class QuarantineDetail:
    """A quarantine record with its audit trails: the replays of its message
    and the releases and resolutions, each oldest first."""

    record: QuarantineRecord
    replays: tuple[QuarantineReplay, ...]
    actions: tuple[QuarantineAction, ...]


@dataclass(frozen=True, slots=True)
class CommandExplanation:
    """Why a command was, or would be, skipped, as of ``at`` (UTC).

    ``verdict`` is one of:

    - ``"duplicate"``: evidence is stored; a delivery whose payload has the
      ``stored_digest`` is skipped (its stored result handed back), any other
      payload is refused and quarantined (``payload_mismatch``);
    - ``"fresh"``: no evidence; a delivery is processed, unless its sent time
      is older than the retention horizon (``beyond_retention``).

    ``summary`` says it in one sentence. ``evidence`` is the stored row
    (digest, processed and expiry times), ``quarantine`` the command's
    records with their actions, ``effects`` the ledger's effects whose key is
    the command ID or starts with it followed by ``/``, ``:`` or ``.``, and
    ``outbox`` the outgoing row with the same command ID, if any.

    ``quarantine`` holds the oldest records, at most the ``quarantine_limit``
    given to :func:`~inboxguard.explain`; ``quarantine_total`` counts them
    all and ``quarantine_open`` the open ones, so a command refused thousands
    of times is explained in a bounded size (page through the rest with
    :func:`~inboxguard.quarantine_list`).
    """

    consumer: str
    command_id: str
    at: dt.datetime
    verdict: str
    summary: str
    evidence: InboxRecord | None
    quarantine: tuple[QuarantineDetail, ...]
    effects: tuple[EffectRecord, ...]
    outbox: OutboxRow | None
    #: Quarantine records of the command in all (``quarantine`` may show fewer).
    quarantine_total: int = 0
    #: Open quarantine records of the command in all.
    quarantine_open: int = 0
