"""Idempotency contracts of well-known providers, as data, each with its source.

Each entry restates what the provider's public documentation says (read when
this module was written). None of these providers documents a lookup *by
idempotency key*, so ``supports_lookup`` is false everywhere: if your adapter
implements ``lookup`` another way (for example a search on a metadata field
that carries the key), say so with
``dataclasses.replace(known_contract("stripe"), supports_lookup=True)``.

Windows are the documented *minimum*; where a provider gives several, the
shortest is shipped. Re-check them when a provider changes its documentation.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from types import MappingProxyType

from inboxguard.effects.provider import MismatchBehaviour, ProviderContract

__all__ = ["KNOWN_CONTRACTS", "known_contract"]

_H = dt.timedelta(hours=1)

_CONTRACTS = (
    ProviderContract(
        name="stripe",
        idempotency_window=24 * _H,
        on_mismatch=MismatchBehaviour.REJECT,
        source="https://docs.stripe.com/idempotency; https://docs.stripe.com/api/idempotent_requests",
        notes=(
            "Idempotency-Key header, up to 255 characters. Keys may be pruned once at least"
            " 24 hours old; a reused pruned key is a new request. The first response is"
            " replayed, 500s included. A different endpoint or parameters with the same key"
            " is an idempotency_error."
        ),
    ),
    ProviderContract(
        name="adyen",
        idempotency_window=31 * 24 * _H,
        on_mismatch=MismatchBehaviour.UNDOCUMENTED,
        source="https://docs.adyen.com/development-resources/api-idempotency",
        notes=(
            "Idempotency-Key header, up to 64 characters, POST only. Keys are valid for a"
            " minimum of 31 days, scoped to the company account, and NOT checked across"
            " regions: pin one region per effect key."
        ),
    ),
    ProviderContract(
        name="aws-ec2-run-instances",
        idempotency_window=24 * _H,
        on_mismatch=MismatchBehaviour.REJECT,
        source="https://docs.aws.amazon.com/AWSEC2/latest/APIReference/Run_Instance_Idempotency.html",
        notes=(
            "ClientToken up to 64 ASCII characters; valid for at least 24 hours after the"
            " instance terminates (24 hours from the first request is a safe lower bound);"
            " changed parameters give IdempotentParameterMismatch; not shared across regions."
        ),
    ),
    ProviderContract(
        name="checkout.com",
        idempotency_window=24 * _H,
        source="https://www.checkout.com/docs/payments/manage-payments/idempotency",
        notes="24 hours by default (configurable); concurrent duplicates: only one is processed.",
    ),
    ProviderContract(
        name="ppro",
        idempotency_window=24 * _H,
        source="https://developerhub.ppro.com/global-api/reference/api-requests-idempotency",
        notes="24 hours; 409 while the first request is in transit; 4xx responses are not stored.",
    ),
    ProviderContract(
        name="truelayer",
        idempotency_window=6 * _H,
        on_mismatch=MismatchBehaviour.REJECT,
        source="https://docs.truelayer.com/docs/idempotency",
        notes="6 hours or 30 days depending on the API; the shorter is shipped.",
    ),
    ProviderContract(
        name="checkhq",
        idempotency_window=24 * _H,
        source="https://docs.checkhq.com/docs/idempotent-requests",
        notes="24 hours; the provider warns that retries older than that need check-then-create.",
    ),
    ProviderContract(
        name="qonto",
        idempotency_window=dt.timedelta(minutes=30),
        on_mismatch=MismatchBehaviour.REPLAY,
        source="https://docs.qonto.com/get-started/general/idempotent-requests",
        notes="30 minutes; the cached response is returned even if the body differs.",
    ),
    ProviderContract(
        name="aws-sqs-fifo",
        idempotency_window=dt.timedelta(minutes=5),
        on_mismatch=MismatchBehaviour.REPLAY,
        source=(
            "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/"
            "FIFO-key-terms.html"
        ),
        notes=(
            "MessageDeduplicationId (or a SHA-256 of the body): a 5-minute deduplication"
            " interval; a duplicate ID is accepted but not delivered again."
        ),
    ),
)

#: Contracts of well-known providers by name (read-only).
KNOWN_CONTRACTS: Mapping[str, ProviderContract] = MappingProxyType(
    {contract.name: contract for contract in _CONTRACTS if contract.name is not None}
)


def known_contract(name: str) -> ProviderContract:
    """The shipped contract of a well-known provider (``"stripe"``, ``"adyen"``, ...),
    with its ``source``; see :data:`KNOWN_CONTRACTS` for the list.

    Raises:
        KeyError: no contract is shipped under that name (the message lists them).
    """
    try:
        return KNOWN_CONTRACTS[name]
    except KeyError:
        names = ", ".join(sorted(KNOWN_CONTRACTS))
        msg = f"no shipped contract named {name!r}; known: {names}"
        raise KeyError(msg) from None
