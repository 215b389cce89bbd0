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

#: Those no longer in ``inboxguard.__all__`` (records and reports a call
#: returns, the store interface's own checks): each stays in its one home.
HOMES = {
    "CompactionResult": "inboxguard.outbox",
    "DispatchStats": "inboxguard.outbox",
    "EffectRecord": "inboxguard.effects",
    "EffectTransition": "inboxguard.effects",
    "InboxRecord": "inboxguard.inbox",
    "OutboxRow": "inboxguard.outbox",
    "OutboxStatus": "inboxguard.outbox",
    "PurgePlan": "inboxguard.inbox",
    "QuarantineRecord": "inboxguard.inbox",
    "ReconcileReport": "inboxguard.effects",
    "WindowRow": "inboxguard._core.retention",
}

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
    missing = [name for name in BEFORE if name not in inboxguard.__all__ and name not in HOMES]
    assert missing == []
    for name in BEFORE:
        if name in HOMES:
            assert name not in inboxguard.__all__
            assert getattr(importlib.import_module(HOMES[name]), name) is not None
        else:
            assert getattr(inboxguard, name) is not None


@pytest.mark.parametrize("old", GONE)
def test_no_alias_module_remains(old: str) -> None:
    """The names live in one home each; the alias modules are gone."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
