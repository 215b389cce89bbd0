"""Recording outcomes: every write after the insert is fenced, and explained.

The recorder maps a definite outcome to the state machine's target (from
``prepared``: ``confirmed`` or ``rejected``; from ``unknown``: ``reconciled``),
checks the transition, writes it conditioned on this worker's fencing token,
and turns a lost race into :class:`~inboxguard.StaleLeaseError`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from inboxguard._core.text import error_text, storable_text
from inboxguard.effects._records import EffectRecord
from inboxguard.effects._store import (
    Event,
    Held,
    Store,
    oversized_details,
    receipt_columns,
    unstorable_receipt,
)
from inboxguard.effects.provider import Provider, Receipt
from inboxguard.effects.state import EffectState, check_transition
from inboxguard.errors import (
    ConfigurationError,
    EffectOutcomeUnknownError,
    ReceiptTooLargeError,
    StaleLeaseError,
)

__all__ = ["Recorder"]

logger = logging.getLogger("inboxguard.effects")


class Recorder:
    """Fenced writes of one ledger, with its clock and actor."""

    def __init__(
        self, store: Store, now: Callable[[], dt.datetime], actor: Callable[[], str]
    ) -> None:
        self.store = store
        self.now = now
        self.actor = actor

    def take_over(
        self, record: EffectRecord, owner: str, lease: dt.timedelta, note: str | None
    ) -> Held | None:
        """Acquire an effect's lease with a new fencing token (None: lost the race)."""
        now = self.now()
        return self.store.take_over(record, owner, now + lease, self.event("takeover", now, note))

    def lookup(self, held: Held, provider: Provider) -> Receipt | None:
        """Ask the provider; a failed or malformed lookup leaves the effect unknown."""
        try:
            found = provider.lookup(held.key)
        except BaseException as error:
            self.to_unknown(held, "lookup", error)
            if not isinstance(error, Exception):  # KeyboardInterrupt and the like
                raise
            msg = f"effect {held.key!r}: the provider lookup failed ({error!r}); retry later"
            raise EffectOutcomeUnknownError(msg, effect_key=held.key, state="unknown") from error
        if found is not None and not isinstance(found, Receipt):
            bad = ConfigurationError(
                f"{type(provider).__name__}.lookup returned {found!r}; it must return a"
                " Receipt or None"
            )
            self.to_unknown(held, "lookup", bad)
            raise bad
        return found

    def finish(
        self,
        held: Held,
        *,
        applied: bool,
        receipt: Receipt | None = None,
        error: BaseException | None = None,
        note: str | None = None,
    ) -> Held:
        """Record a definite outcome: confirmed/rejected from prepared, reconciled
        from unknown."""
        if held.state is EffectState.PREPARED:
            target = EffectState.CONFIRMED if applied else EffectState.REJECTED
        else:
            target = EffectState.RECONCILED
        values: dict[str, Any] = {"applied": applied, "lease_owner": None, "lease_expires_at": None}
        values.update(receipt_columns(receipt, "receipt"))
        why = None if receipt is None else unstorable_receipt(receipt)
        if why is not None:
            logger.warning("effect %s: %s; the whole receipt: %r", held.key, why, receipt)
            note = why if note is None else f"{note}; {why}"
        if error is not None:
            values["last_error"] = error_text(error, what=f"effect {held.key}'s error")
        name = {
            EffectState.CONFIRMED: "confirm",
            EffectState.REJECTED: "reject",
            EffectState.RECONCILED: "reconcile",
        }[target]
        return self.write(held, target, values, self.event(name, self.now(), note))

    def confirm(self, held: Held, receipt: Receipt) -> Held:
        """Record the receipt ``send`` returned. A receipt the database refuses
        is recorded with its reference escaped and without its details (the
        whole receipt is logged), and a receipt too large to store raises
        :class:`~inboxguard.ReceiptTooLargeError` once the outcome is recorded.

        The provider has applied the effect by now: losing that fact to an
        encoding error or a packet limit would leave it ``prepared`` and invite
        a re-send.
        """
        try:
            written = self.finish(held, applied=True, receipt=receipt)
        except StaleLeaseError:
            if self.late_receipt(held, receipt):
                return held
            raise
        except Exception as error:  # the database refused the receipt anyway
            logger.warning(
                "effect %s: the receipt could not be stored as given (%r): %r",
                held.key,
                error,
                receipt,
            )
            note = error_text(error, what="a refused receipt", prefix="receipt not storable: ")
            written = self.finish(held, applied=True, receipt=Receipt(receipt.reference), note=note)
        if oversized_details(receipt) is not None:
            msg = (
                f"effect {held.key!r} was applied and is recorded as confirmed, but"
                f" {unstorable_receipt(receipt)};"
                " return a smaller receipt from the provider (store large answers elsewhere"
                " and keep their address in the details)"
            )
            raise ReceiptTooLargeError(msg, effect_key=held.key)
        return written

    def late_receipt(self, held: Held, receipt: Receipt) -> bool:
        """Record a receipt that came back after this worker's lease was taken
        over, so that the provider's answer is never lost: in the history
        always, and as the effect's outcome (``reconciled``, applied) when it is
        still ``unknown`` and nobody holds its lease. True when it settled it."""
        logger.warning(
            "effect %s: the provider answered %r after this worker's lease (fencing token %d)"
            " was taken over; recording it",
            held.key,
            receipt,
            held.token,
        )
        note = f"late receipt {receipt.reference!r} (fencing token {held.token})"
        current = self.store.read(held.key)
        if current is None:
            return False
        now = self.now()
        free = current.lease_owner is None or (
            current.lease_expires_at is not None and current.lease_expires_at <= now
        )
        if current.state is EffectState.UNKNOWN and free:
            taken = self.take_over(current, held.owner, dt.timedelta(minutes=1), note)
            if taken is not None:
                try:
                    self.finish(taken, applied=True, receipt=receipt, note=note)
                except StaleLeaseError:
                    pass
                else:
                    return True
            current = self.store.read(held.key) or current
        self.store.add_history(current, self.event("late_receipt", now, note))
        return False

    def to_unknown(
        self,
        held: Held,
        step: str,
        error: BaseException | None,
        *,
        note: str | None = None,
    ) -> Held:
        """Record an ambiguous outcome (``prepared -> unknown``) and release the lease."""
        values: dict[str, Any] = {"lease_owner": None, "lease_expires_at": None}
        if error is not None:
            values["last_error"] = error_text(
                error, what=f"effect {held.key}'s error", prefix=f"{step}: "
            )
        target = EffectState.UNKNOWN
        name = "unknown" if held.state is EffectState.PREPARED else "release"
        text = note or (values.get("last_error") if error is not None else None)
        still = "still " if held.state is EffectState.UNKNOWN else ""
        logger.warning("effect %s: outcome %sunknown after %s (%s)", held.key, still, step, text)
        return self.write(held, target, values, self.event(name, self.now(), text))

    def write(self, held: Held, target: EffectState, values: dict[str, Any], event: Event) -> Held:
        """Write a checked transition fenced by ``held``; StaleLeaseError if fenced out."""
        if target is not held.state:
            check_transition(held.state, target, effect_key=held.key)
        written = self.store.fenced_update(held, target, values, event)
        if written is not None:
            return written
        current = self.store.read(held.key)
        token = None if current is None else current.fencing_token
        msg = (
            f"effect {held.key!r}: this worker's lease (fencing token {held.token}) was taken"
            f" over (current token {token}); its {event.name} was not recorded; the current"
            " holder decides the outcome; deliver the task again to get it"
        )
        raise StaleLeaseError(msg, effect_key=held.key, token=held.token, current_token=token)

    def event(self, name: str, at: dt.datetime, note: str | None = None) -> Event:
        """A history entry by this ledger's actor; its note made storable."""
        stored = None if note is None else storable_text(note, what=f"a {name} note")
        return Event(name, self.actor(), at, stored)
