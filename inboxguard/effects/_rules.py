"""The ledger's decisions that need no database: validation, what a stored
record means for a new call, and the messages that explain it."""

from __future__ import annotations

import datetime as dt
import logging

from inboxguard.effects._records import EffectRecord
from inboxguard.effects.provider import Provider, ProviderContract, Receipt
from inboxguard.effects.state import EffectState
from inboxguard.errors import (
    ConfigurationError,
    EffectOutcomeUnknownError,
    EffectPayloadConflictError,
    InvalidTransitionError,
    ProviderRejectedError,
)

__all__ = [
    "check_digest",
    "check_lease",
    "contract_of",
    "provider_name",
    "refuse_if_leased",
    "settled",
    "why_takeover",
]

logger = logging.getLogger("inboxguard.effects")
_PENDING = (EffectState.PREPARED, EffectState.UNKNOWN)


def contract_of(provider: Provider) -> ProviderContract:
    """The provider's contract; ConfigurationError if it has none."""
    contract = getattr(provider, "contract", None)
    if not isinstance(contract, ProviderContract):
        msg = (
            f"{type(provider).__name__} has no `contract` (a ProviderContract): declare how long"
            " the provider remembers idempotency keys and whether it offers a lookup"
        )
        raise ConfigurationError(msg)
    return contract


def provider_name(provider: Provider, contract: ProviderContract) -> str:
    """The name stored with each effect of this provider."""
    return (contract.name or type(provider).__qualname__)[:255]


def check_lease(lease: dt.timedelta) -> None:
    """Insist on a positive lease."""
    if not isinstance(lease, dt.timedelta) or lease <= dt.timedelta(0):
        msg = f"lease must be a positive timedelta, got {lease!r}"
        raise ConfigurationError(msg)


def check_digest(record: EffectRecord, digest: str) -> None:
    """Fail closed (EffectPayloadConflictError) when the stored digest is not
    the payload's digest."""
    if record.digest == digest:
        return
    logger.warning(
        "effect %s: payload mismatch (stored %s, incoming %s); nothing sent",
        record.effect_key,
        record.digest,
        digest,
    )
    msg = (
        f"effect {record.effect_key!r} was recorded with payload {record.digest}, but this"
        f" call carries {digest}; nothing was sent: an effect key belongs to one business"
        " intent, so find out why the payload changed (a reused key, or a command mutated"
        " between retries)"
    )
    raise EffectPayloadConflictError(
        msg, effect_key=record.effect_key, stored_digest=record.digest, incoming_digest=digest
    )


def settled(record: EffectRecord) -> Receipt | None:
    """The stored receipt of a settled effect; raises for one settled as not applied."""
    state = record.state
    if state in _PENDING:
        return None
    if state is EffectState.CONFIRMED or (state is EffectState.RECONCILED and record.applied):
        if record.receipt is None:  # pragma: no cover - every applied outcome stores one
            msg = f"effect {record.effect_key!r} is {state} but has no stored receipt"
            raise ProviderRejectedError(msg, reason="no-receipt", effect_key=record.effect_key)
        return record.receipt
    if state is EffectState.COMPENSATED:
        msg = (
            f"effect {record.effect_key!r} was compensated; it is final and is not executed"
            " again under this key"
        )
        raise InvalidTransitionError(
            msg, from_state=str(state), to_state="prepared", effect_key=record.effect_key
        )
    what = "rejected by the provider" if state is EffectState.REJECTED else "reconciled as"
    if state is EffectState.RECONCILED:
        what += " not applied"
    msg = (
        f"effect {record.effect_key!r} was {what} ({record.last_error or 'no detail'});"
        " it is final: it is not sent again under this key"
    )
    raise ProviderRejectedError(msg, reason=str(state), effect_key=record.effect_key)


def refuse_if_leased(record: EffectRecord, now: dt.datetime) -> None:
    """EffectOutcomeUnknownError (retryable) while another worker holds the lease."""
    expires = record.lease_expires_at
    if record.lease_owner is None or expires is None or expires <= now:
        return
    msg = (
        f"effect {record.effect_key!r} is {record.state} and another worker holds its lease"
        f" until {expires.isoformat()}; retry after that: the retry returns its outcome"
    )
    raise EffectOutcomeUnknownError(msg, effect_key=record.effect_key, state=str(record.state))


def why_takeover(record: EffectRecord) -> str:
    """The history note of a lease takeover."""
    if record.state is EffectState.PREPARED:
        return "lease expired while prepared: the provider may have been called"
    return "retrying an unknown outcome"
