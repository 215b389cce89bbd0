"""What the ledger needs from a provider: a protocol, a receipt and a contract.

The contract is the provider's *documented* idempotency behaviour. The ledger
relies on it for one decision only: whether re-sending with the same key is
safe (inside ``idempotency_window``; never when it is ``None``) and whether a
lookup can settle an ambiguous outcome (``supports_lookup``). Get it from the provider's own
documentation and review it when the provider changes it: a shorter window
silently weakens the guarantee.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from inboxguard.errors import ConfigurationError

__all__ = ["KEYS_KEPT_FOREVER", "MismatchBehaviour", "Provider", "ProviderContract", "Receipt"]

KEYS_KEPT_FOREVER = dt.timedelta.max
"""The ``idempotency_window`` of a provider that remembers every key forever
(``None`` declares one with no idempotency at all)."""


@dataclass(frozen=True, slots=True)
class Receipt:
    """What the provider hands back for an applied effect, and what the ledger
    stores: a ``reference`` (the provider's ID: a charge ID, a message ID) and
    optional JSON-serialisable ``details``."""

    reference: str
    details: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if type(self.reference) is not str or not self.reference or len(self.reference) > 255:
            msg = (
                f"Receipt.reference must be a non-empty str of at most 255 characters,"
                f" got {self.reference!r}; pass the provider's own ID for the effect"
            )
            raise ConfigurationError(msg)
        if self.details is not None and not isinstance(self.details, Mapping):
            msg = f"Receipt.details must be a mapping or None, got {type(self.details).__name__}"
            raise ConfigurationError(msg)


class MismatchBehaviour(enum.StrEnum):
    """What a provider does with a reused idempotency key and a different payload.

    The ledger refuses such a call itself (``EffectPayloadConflictError``) before
    sending, so this matters only for calls made outside the ledger; it is
    recorded so that the contract tells the whole story.
    """

    #: The provider returns an error (Stripe ``idempotency_error``, AWS
    #: ``IdempotentParameterMismatch``).
    REJECT = "reject"
    #: The provider returns the first response, ignoring the new payload.
    REPLAY = "replay"
    #: The provider ignores the key and performs a new request.
    IGNORE_KEY = "ignore_key"
    #: The provider's documentation does not say.
    UNDOCUMENTED = "undocumented"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderContract:
    """A provider's idempotency contract, as documented by the provider.

    Args:
        idempotency_window: required: how long the provider remembers a key
            after its first request; :data:`KEYS_KEPT_FOREVER` when it never
            forgets one, and ``None`` when it has no idempotency at all (an
            ambiguous outcome then goes to an operator, never to a re-send).
            Re-sends with the same key are made only while the window is
            certainly still open.
        supports_lookup: the provider's ``lookup(key)`` reports whether a
            request with that key was applied (found receipts are trusted at
            any age; "not found" is trusted only inside the window).
        on_mismatch: what the provider does with a reused key and a different
            payload.
        name: a stable name stored with each effect (``reconcile`` only
            touches effects of its provider's name); default: the provider's
            class name.
        source: where the facts come from (a documentation URL).
        notes: anything else worth knowing (scopes, regions, key length).
    """

    idempotency_window: dt.timedelta | None
    supports_lookup: bool = False
    on_mismatch: MismatchBehaviour = MismatchBehaviour.UNDOCUMENTED
    name: str | None = None
    source: str | None = None
    notes: str = field(default="")

    def __post_init__(self) -> None:
        window = self.idempotency_window
        if window is not None and (
            not isinstance(window, dt.timedelta) or window <= dt.timedelta(0)
        ):
            msg = (
                f"ProviderContract.idempotency_window must be a positive timedelta,"
                f" KEYS_KEPT_FOREVER (keys remembered forever) or None (no idempotency),"
                f" got {window!r}"
            )
            raise ConfigurationError(msg)
        if not isinstance(self.supports_lookup, bool):
            msg = f"ProviderContract.supports_lookup must be a bool, got {self.supports_lookup!r}"
            raise ConfigurationError(msg)
        if not isinstance(self.on_mismatch, MismatchBehaviour):
            try:
                object.__setattr__(self, "on_mismatch", MismatchBehaviour(self.on_mismatch))
            except ValueError:
                choices = ", ".join(repr(str(m)) for m in MismatchBehaviour)
                msg = (
                    f"ProviderContract.on_mismatch must be one of {choices},"
                    f" got {self.on_mismatch!r}"
                )
                raise ConfigurationError(msg) from None

    def window_end(self, first_sent_at: dt.datetime) -> dt.datetime | None:
        """When a key first used at ``first_sent_at`` may be forgotten: None for
        keys kept forever, ``first_sent_at`` itself for a provider without
        idempotency (no re-send is ever safe)."""
        if self.idempotency_window is None:
            return first_sent_at
        if self.idempotency_window == KEYS_KEPT_FOREVER:
            return None
        return first_sent_at + self.idempotency_window

    def remembers(self, first_sent_at: dt.datetime, now: dt.datetime) -> bool:
        """Whether a key first used at ``first_sent_at`` is still remembered at ``now``."""
        end = self.window_end(first_sent_at)
        return end is None or now < end


@runtime_checkable
class Provider(Protocol):
    """An outside system the ledger sends effects to.

    ``send`` performs the effect with ``idempotency_key`` as the provider's
    idempotency key and returns a :class:`Receipt`. It raises
    :class:`~inboxguard.ProviderRejectedError` for a definite refusal, and the
    builtin ``TimeoutError`` or ``ConnectionError`` when the outcome is
    ambiguous (translate your HTTP client's timeouts to these). Any other
    exception is treated as ambiguous too. ``lookup`` returns the receipt of an
    applied request made with the key, or ``None``; it is called only when
    ``contract.supports_lookup`` is true.
    """

    contract: ProviderContract

    def send(self, idempotency_key: str, payload: Any) -> Receipt:
        """Perform the effect (idempotently per key); return its receipt."""
        ...

    def lookup(self, idempotency_key: str) -> Receipt | None:
        """Return the receipt of the request made with this key, or None."""
        ...
