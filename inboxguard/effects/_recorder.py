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

from inboxguard.effects._records import EffectRecord
from inboxguard.effects._store import Event, Held, Store, receipt_columns
from inboxguard.effects.provider import Provider, Receipt
from inboxguard.effects.state import EffectState, check_transition
from inboxguard.errors import ConfigurationError, EffectOutcomeUnknownError, StaleLeaseError

__all__ = ["Recorder", "storable_text"]

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
        if error is not None:
            values["last_error"] = f"{type(error).__name__}: {error}"
        name = {
            EffectState.CONFIRMED: "confirm",
            EffectState.REJECTED: "reject",
            EffectState.RECONCILED: "reconcile",
        }[target]
        return self.write(held, target, values, self.event(name, self.now(), note))

    def confirm(self, held: Held, receipt: Receipt) -> Held:
        """Record the receipt ``send`` returned; a receipt the database refuses is
        recorded with its reference made storable and in full in the history note.

        The provider has applied the effect by now: losing that fact to an
        encoding error would leave it ``prepared`` and invite a re-send.
        """
        try:
            return self.finish(held, applied=True, receipt=receipt)
        except StaleLeaseError:
            raise
        except Exception as error:  # the database refused the receipt's text
            logger.warning(
                "effect %s: the receipt could not be stored as given (%r); storing it escaped",
                held.key,
                error,
            )
            stored = Receipt(storable_text(receipt.reference))
            note = storable_text(
                f"receipt not storable as given ({type(error).__name__}): {receipt!r}", limit=None
            )
            return self.finish(held, applied=True, receipt=stored, note=note)

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
            values["last_error"] = f"{step}: {type(error).__name__}: {error}"
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
        """A history entry by this ledger's actor."""
        return Event(name, self.actor(), at, note)


def storable_text(text: str, limit: int | None = 255) -> str:
    """``text`` with what a database driver refuses escaped: lone surrogates
    (``\\udXXX``) and NUL characters (``\\x00``); cut at ``limit``."""
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return escaped if limit is None else escaped[:limit]
