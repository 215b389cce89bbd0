"""The values the ledger hands back: an effect's record, its history and a
reconciliation report."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from inboxguard.effects.provider import Receipt
from inboxguard.effects.state import EffectState
from inboxguard.errors import ConfigurationError

__all__ = ["EffectRecord", "EffectTransition", "ReconcileReport"]


@dataclass(frozen=True, slots=True)
class EffectTransition:
    """One entry of an effect's append-only history.

    ``event`` says what happened: ``prepare``, ``confirm``, ``reject``,
    ``unknown``, ``reconcile``, ``compensate`` (changes of state), or
    ``takeover``, ``resend``, ``release`` (lease events, with the same state on
    both sides). ``actor`` is the ledger's actor (host:pid by default).
    """

    from_state: EffectState | None
    to_state: EffectState
    event: str
    version: int
    fencing_token: int
    actor: str
    at: dt.datetime
    note: str | None


@dataclass(frozen=True, slots=True)
class EffectRecord:
    """The committed state of one effect.

    ``version`` counts the row's writes; ``fencing_token`` counts lease
    acquisitions; ``attempts`` counts requests dispatched to the provider
    (recorded before each one). ``applied`` is set by ``reconciled`` (did the
    provider apply it?) and is true for ``confirmed``. ``first_sent_at`` starts
    the provider's idempotency window.
    """

    effect_key: str
    provider: str
    state: EffectState
    digest: str
    receipt: Receipt | None
    attempts: int
    version: int
    fencing_token: int
    lease_owner: str | None
    lease_expires_at: dt.datetime | None
    applied: bool | None
    compensation: Receipt | None
    last_error: str | None
    first_sent_at: dt.datetime
    created_at: dt.datetime
    updated_at: dt.datetime
    history: tuple[EffectTransition, ...] = ()

    @property
    def cursor(self) -> str:
        """The ``after`` of the page that follows this record in
        :meth:`EffectLedger.effects <inboxguard.EffectLedger.effects>`: its
        last update and key, ``2026-12-01T21:40:11.123456+00:00,invoice-42/charge``."""
        return f"{self.updated_at.astimezone(dt.UTC).isoformat()},{self.effect_key}"


def parse_cursor(text: str) -> tuple[dt.datetime, str]:
    """The update time and key an :attr:`EffectRecord.cursor` names.

    Raises:
        ConfigurationError: ``text`` is not a cursor.
    """
    at, sep, key = text.partition(",") if isinstance(text, str) else ("", "", "")
    try:
        when = dt.datetime.fromisoformat(at)
    except ValueError:
        when = None
    if not sep or not key or when is None or when.tzinfo is None:
        msg = (
            f"after={text!r} is not an effect page cursor; pass the cursor the previous"
            " page ended with (an aware ISO time, a comma, the effect key)"
        )
        raise ConfigurationError(msg)
    return when.astimezone(dt.UTC), key


@dataclass(slots=True)
class ReconcileReport:
    """What :meth:`EffectLedger.reconcile` did, effect key by effect key.

    ``reconciled``: settled by a lookup that found the effect. ``pending``: not
    found, but a retry with the payload may still re-send inside the window.
    ``needs_operator``: no safe automatic path (no lookup, or the window has
    passed and the lookup found nothing). ``skipped``: another worker holds the
    lease, or took it over while this pass looked the effect up (that worker
    decides; the pass goes on with the next effect). ``failed``: the lookup
    itself failed (key, error text).
    """

    examined: int = 0
    reconciled: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    needs_operator: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
