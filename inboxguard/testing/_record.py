"""What a failure case saw, and the one assertion that judges it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from inboxguard.effects import EffectLedger, EffectRecord
from inboxguard.effects.state import EffectState

if TYPE_CHECKING:
    from inboxguard.inbox import Inbox
    from inboxguard.testing._provider import FakeProvider

__all__ = ["CaseRecord", "EffectivelyOnceError", "assert_effectively_once", "durable_receipts"]

#: Events of the ledger's history that record an applied outcome (a receipt).
_RECEIPT_EVENTS = frozenset({"confirm", "reconcile"})


class EffectivelyOnceError(AssertionError):
    """A command was not applied effectively once; the message says which
    part (the inbox, the ledger, the provider) is wrong and what it held."""


@dataclass
class CaseRecord:
    """What happened in one failure case, counted from the outside.

    ``deliveries``: times the message was handed to the handler; ``handler_runs``:
    times the inbox handed a fresh claim to the guarded block (a duplicate is
    not a run); ``provider_requests`` / ``provider_effects``: sends that
    reached the provider and effects it really applied; ``receipts``: durable
    receipts in the ledger; ``inbox_state``: ``committed``, ``absent`` and any
    quarantine reasons; ``ledger_state``: the effect's state (``-`` without a
    ledger); ``outcomes``: what each delivery ended with, in order.
    """

    case: str
    consumer: str | None
    command_id: str | None
    deliveries: int = 0
    handler_runs: int = 0
    provider_requests: int = 0
    provider_effects: int = 0
    receipts: int = 0
    inbox_state: str = "absent"
    ledger_state: str = "-"
    effect_key: str | None = None
    outcomes: list[str] = field(default_factory=list)
    inbox: Inbox | None = field(default=None, repr=False)
    ledger: EffectLedger | None = field(default=None, repr=False)
    provider: FakeProvider | None = field(default=None, repr=False)

    def row(self) -> dict[str, Any]:
        """The counted columns, by name (what the demo prints)."""
        return {
            "deliveries": self.deliveries,
            "handler runs": self.handler_runs,
            "provider requests": self.provider_requests,
            "receipts": self.receipts,
            "inbox": self.inbox_state,
            "ledger": self.ledger_state,
        }

    def __str__(self) -> str:
        cells = ", ".join(f"{k}={v}" for k, v in self.row().items())
        return f"{self.case}: {cells}; outcomes {self.outcomes}"


def durable_receipts(record: EffectRecord | None) -> int:
    """Receipts recorded as applied in an effect's history (one row holds at most one)."""
    if record is None:
        return 0
    return sum(1 for t in record.history if t.event in _RECEIPT_EVENTS)


def inbox_state(inbox: Inbox, consumer: str | None, command_id: str | None) -> str:
    """``committed`` / ``absent``, then the reasons of quarantine records for the command."""
    if command_id is None:
        return "absent"
    found = consumer is not None and inbox.lookup(consumer, command_id) is not None
    state = "committed" if found else "absent"
    reasons = sorted(
        {
            r.reason
            for r in inbox.quarantined(consumer, status=None, limit=1000)
            if r.command_id == command_id
        }
    )
    return state if not reasons else f"{state}, quarantined ({', '.join(reasons)})"


def _inbox_rows(inbox: Inbox, consumer: str, command_id: str) -> int:
    table = inbox.tables.inbox
    query = (
        select(func.count())
        .select_from(table)
        .where(table.c.consumer == consumer, table.c.command_id == command_id)
    )
    with inbox.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _effect_key(
    effect_key: str | None, ledger: EffectLedger, provider: FakeProvider | None
) -> str | None:
    if effect_key is not None:
        return effect_key
    if provider is not None and len(provider.keys()) == 1:
        return provider.keys()[0]
    found = ledger.effects(limit=2)
    return found[0].effect_key if len(found) == 1 else None


def _no_effect_attempted(ledger: EffectLedger | None, provider: FakeProvider | None) -> bool:
    """Whether neither the ledger nor the provider saw any effect at all."""
    if ledger is None and provider is None:
        return False
    if provider is not None and (provider.requests or provider.keys()):
        return False
    return ledger is None or not ledger.effects(limit=1)


def assert_effectively_once(
    record: CaseRecord | None = None,
    /,
    *,
    inbox: Inbox | None = None,
    consumer: str | None = None,
    command_id: str | None = None,
    ledger: EffectLedger | None = None,
    effect_key: str | None = None,
    provider: FakeProvider | None = None,
    ledger_state: EffectState | str | None = None,
) -> None:
    """Assert that a command took effect once: one inbox row for it; with a
    ledger, one effect in the expected state (``confirmed``, or ``reconciled``
    as applied, unless ``ledger_state`` says otherwise) with one durable
    receipt; with a provider, exactly one effect applied there. When the
    ledger holds no effect and no request reached the provider (a handler
    that only writes to its database), only the inbox row is asserted,
    unless ``effect_key`` names an effect that must exist.

    Pass the parts, or a :class:`CaseRecord` a failure case returned (its
    parts are used where no keyword overrides them). The current database
    state is read, not the record's counts.

    Raises:
        EffectivelyOnceError: names each part that is wrong and what it found.
        TypeError: no inbox, consumer or command ID to check.
    """
    if record is not None:
        inbox = inbox or record.inbox
        consumer = consumer or record.consumer
        command_id = command_id or record.command_id
        ledger = ledger or record.ledger
        provider = provider or record.provider
        effect_key = effect_key or record.effect_key
    if inbox is None or (record is None and (consumer is None or command_id is None)):
        msg = "assert_effectively_once needs inbox=, consumer= and command_id= (or a record)"
        raise TypeError(msg)
    problems: list[str] = []
    if consumer is None or command_id is None:
        problems.append(
            "inbox: no row; the guard never claimed the command in this case (pass"
            " consumer= and command_id= to name it)"
        )
    else:
        rows = _inbox_rows(inbox, consumer, command_id)
        if rows != 1:
            state = inbox_state(inbox, consumer, command_id)
            problems.append(f"inbox: {rows} rows for ({consumer!r}, {command_id!r}), state {state}")
    if effect_key is None and _no_effect_attempted(ledger, provider):
        # A database-only handler: there is no effect to judge, only its inbox row.
        ledger = provider = None
    key = None
    if ledger is not None:
        key = _effect_key(effect_key, ledger, provider)
        problems += _ledger_problems(ledger, key, ledger_state)
    if provider is not None:
        key = key or effect_key
        applied = provider.effects if key is None else provider.effects_for(key)
        if applied != 1:
            where = "in total" if key is None else f"for key {key!r}"
            problems.append(
                f"provider: {applied} effects {where} ({provider.requests} requests,"
                f" keys {provider.keys()})"
            )
    if problems:
        head = f"command {command_id!r} of {consumer!r} was not applied effectively once:"
        raise EffectivelyOnceError("\n  ".join([head, *problems]))


def _ledger_problems(
    ledger: EffectLedger, key: str | None, expected: EffectState | str | None
) -> list[str]:
    if key is None:
        found = [r.effect_key for r in ledger.effects(limit=5)]
        if not found:
            return [
                "ledger: no effect at all, though the provider was called: does the"
                " handler call it outside ledger.execute()?"
            ]
        return [f"ledger: cannot tell which effect to check (effects {found}); pass effect_key="]
    effect = ledger.get(key)
    if effect is None:
        return [f"ledger: no effect {key!r}"]
    problems = []
    if expected is not None:
        ok = effect.state is EffectState(expected)
        want = str(EffectState(expected))
    else:
        ok = effect.state is EffectState.CONFIRMED or (
            effect.state is EffectState.RECONCILED and effect.applied is True
        )
        want = "confirmed, or reconciled as applied"
    if not ok:
        problems.append(
            f"ledger: effect {key!r} is {effect.state} (applied={effect.applied}),"
            f" expected {want}; last error {effect.last_error!r}"
        )
    receipts = durable_receipts(effect)
    wanted = 1 if effect.applied else 0  # an unknown or rejected effect has no receipt
    if receipts != wanted:
        events = [t.event for t in effect.history]
        problems.append(
            f"ledger: {receipts} durable receipts for {key!r} (expected {wanted}), history {events}"
        )
    return problems
