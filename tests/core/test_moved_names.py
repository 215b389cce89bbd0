"""Nothing public was lost in the re-housing, and each name has one home."""

from __future__ import annotations

import importlib

import pytest

import inboxguard

#: Every name ``inboxguard`` exported before the re-housing
#: (``git show 8680cef:inboxguard/__init__.py``).
BEFORE = [
    "BeyondRetentionError",
    "CommandRejectedError",
    "CompactionResult",
    "ConfigurationError",
    "DispatchStats",
    "Dispatcher",
    "EffectError",
    "EffectLedger",
    "EffectOutcomeUnknownError",
    "EffectRecord",
    "EffectState",
    "EffectTransition",
    "InProgressError",
    "Inbox",
    "InboxEntry",
    "InboxGuardError",
    "InboxRecord",
    "InvalidCommandError",
    "InvalidTransitionError",
    "MismatchBehaviour",
    "NoActiveGuardError",
    "Outbox",
    "OutboxMessage",
    "OutboxRow",
    "OutboxStatus",
    "PayloadEncodingError",
    "PayloadMismatchError",
    "Provider",
    "ProviderContract",
    "ProviderRejectedError",
    "PurgePlan",
    "PurgeReport",
    "QuarantineReason",
    "QuarantineRecord",
    "Receipt",
    "ReconcileReport",
    "ReconciliationRequiredError",
    "RetentionMisalignedError",
    "RetentionPolicy",
    "StaleLeaseError",
    "UnsupportedDialectError",
    "WindowRow",
    "command_id_for",
    "current_session",
    "digest_of",
    "is_retryable",
    "known_contract",
]

#: Modules that re-exported names under an old path; no release had them.
GONE = [
    "inboxguard.retention",
    "inboxguard.purge",
    "inboxguard.adapters.transports",
    "inboxguard.adapters.transports.celery",
    "inboxguard.adapters.transports.dramatiq",
    "inboxguard.adapters.transports.kombu",
]


def test_every_name_exported_before_is_still_exported() -> None:
    missing = [name for name in BEFORE if name not in inboxguard.__all__]
    assert missing == []
    for name in BEFORE:
        assert getattr(inboxguard, name) is not None


@pytest.mark.parametrize("old", GONE)
def test_no_alias_module_remains(old: str) -> None:
    """The names live in one home each; the alias modules are gone."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
