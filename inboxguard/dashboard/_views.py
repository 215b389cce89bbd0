"""What each page shows, built from the read model (``inboxguard.operations``)
and the services' public readers; no SQL of its own.

A command is shown in three columns that are never folded into one flag:
what the inbox accepted, how its message was delivered, and what the
provider's effect became. A workflow can be retrying while its payment is
confirmed, or complete while a notification is still unknown.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard import EffectLedger
from inboxguard.dashboard._history import History, Sample
from inboxguard.effects import EffectRecord
from inboxguard.inbox import QuarantineRecord
from inboxguard.operations import (
    CommandExplanation,
    Stats,
    explain,
    quarantine_count,
    quarantine_list,
    stats,
)

__all__ = ["CommandView", "Overview", "overview", "search"]

#: What may follow a command ID in the key of an effect it caused.
_KEY_SEPARATORS = ("/", ":", ".")
#: Longest search accepted (command IDs and effect keys are at most 255).
MAX_QUERY = 255


@dataclass(frozen=True, slots=True)
class CommandView:
    """One command at one consumer, in three separate columns."""

    consumer: str
    command_id: str
    explanation: CommandExplanation

    @property
    def accepted(self) -> bool:
        """The inbox holds committed evidence of the command."""
        return self.explanation.evidence is not None

    @property
    def delivery(self) -> str:
        """The outbox row's state in words (``not sent through this outbox``
        when the command has none)."""
        row = self.explanation.outbox
        if row is None:
            return "not sent through this outbox"
        if row.dead_at is not None:
            return f"dead after {row.attempts} attempts"
        if row.delivered_at is not None:
            return f"delivered (attempt {row.attempts})"
        if row.attempts and row.last_error:
            return f"retrying: attempt {row.attempts} failed"
        return "waiting to be sent"

    @property
    def open_quarantine(self) -> int:
        """Open quarantine records of the command."""
        return self.explanation.quarantine_open


@dataclass(frozen=True, slots=True)
class Overview:
    """The front page: one stats reading, the unknown effects (oldest first),
    the open quarantine queue and the sampled outbox history."""

    stats: Stats
    unknown: Sequence[EffectRecord]
    quarantine: Sequence[QuarantineRecord]
    history: Sequence[Sample]
    #: Open quarantine records in all (the queue shows one page of them).
    quarantine_total: int = 0
    #: The ``after`` of the queue's next page (None: this is the last page).
    next_after: int | None = None
    #: Effects in ``unknown`` in all (the table shows one page of them).
    unknown_total: int = 0
    #: The cursor of the unknown effects' next page (None: this is the last page).
    unknown_next: str | None = None


def overview(
    engine: Engine,
    prefix: str,
    history: History,
    limit: int = 50,
    after: int | None = None,
    unknown_after: str | None = None,
) -> Overview:
    """Read the front page (and record a sample of the outbox for the chart);
    the quarantine queue is the page of ``limit`` open records after the id
    ``after``, the unknown effects the page of ``limit`` after the cursor
    ``unknown_after`` (see :attr:`~inboxguard.effects.EffectRecord.cursor`).

    Raises:
        ConfigurationError: ``unknown_after`` is not a cursor.
    """
    reading = stats(engine, table_prefix=prefix)
    history.add(reading)
    unknown: Sequence[EffectRecord] = ()
    if reading.effects is not None:
        ledger = EffectLedger(engine, table_prefix=prefix, telemetry=False)
        unknown = ledger.effects(state="unknown", limit=limit + 1, after=unknown_after)
    unknown_more = len(unknown) > limit
    unknown = unknown[:limit]
    queue: Sequence[QuarantineRecord] = ()
    total = 0
    if reading.consumers is not None:
        queue = quarantine_list(
            engine, table_prefix=prefix, status="open", limit=limit + 1, after=after
        )
        total = quarantine_count(engine, table_prefix=prefix, status="open")
    more = len(queue) > limit
    queue = queue[:limit]
    unknown_total = reading.effects.by_state.get("unknown", 0) if reading.effects else 0
    return Overview(
        reading,
        unknown,
        queue,
        history.samples(),
        quarantine_total=total,
        next_after=queue[-1].id if more else None,
        unknown_total=unknown_total,
        unknown_next=unknown[-1].cursor if unknown_more else None,
    )


def search(engine: Engine, prefix: str, query: str) -> list[CommandView]:
    """Every consumer's view of the command ``query``, or of the command whose
    effect has the key ``query`` (``invoice-42/charge`` finds ``invoice-42``)."""
    reading = stats(engine, table_prefix=prefix)
    consumers = [c.consumer for c in reading.consumers or ()]
    found = _views(engine, prefix, consumers, query)
    if found or reading.effects is None:
        return found
    for candidate in _commands_of_key(query):
        found = _views(engine, prefix, consumers, candidate)
        if found:
            return found
    return []


def _views(engine: Engine, prefix: str, consumers: list[str], command_id: str) -> list[CommandView]:
    out = []
    for consumer in consumers:
        told = explain(engine, consumer=consumer, command_id=command_id, table_prefix=prefix)
        if told.evidence or told.quarantine or told.effects or told.outbox:
            out.append(CommandView(consumer, command_id, told))
    return out


def _commands_of_key(key: str) -> list[str]:
    """The command IDs an effect key may belong to, longest first."""
    cuts = [i for i, ch in enumerate(key) if ch in _KEY_SEPARATORS]
    return [key[:i] for i in reversed(cuts) if i > 0]


def age(value: dt.timedelta | None) -> str:
    """A duration as a person reads it: ``3d 4h``, ``12m 5s``, ``—``."""
    if value is None:
        return "—"
    seconds = int(value.total_seconds())
    if seconds < 0:
        return "0s"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2]
    return " ".join(shown) or "0s"


def when(value: dt.datetime | None) -> str:
    """An aware time in ISO 8601 UTC, to the second; ``—`` for None."""
    if value is None:
        return "—"
    return value.astimezone(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def pretty(value: Any) -> str:
    """A stored JSON value, indented, as plain text (the template escapes it)."""
    if value is None:
        return "—"
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=repr)


def as_json(value: Any, limit: int = 2000) -> str:
    """A stored JSON value on one line, as JSON (``null``, ``true``, quoted
    strings), cut at ``limit``; the template escapes it."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def shown(value: Any, limit: int = 2000) -> str:
    """A stored value as text (escaped by the template), cut at ``limit``."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
