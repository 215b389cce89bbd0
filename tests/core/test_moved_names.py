"""Nothing public was lost in the re-housing: moved modules warn and still work."""

from __future__ import annotations

import importlib
import subprocess
import sys

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

#: Moved public modules: old name -> (new home, names that must still resolve there).
MOVED = {
    "inboxguard.retention": ("inboxguard", ["RetentionPolicy", "WindowRow"]),
    "inboxguard.purge": ("inboxguard", ["PurgePlan", "PurgeReport"]),
    "inboxguard.adapters.transports": ("inboxguard.adapters._transport", ["split_payload"]),
    "inboxguard.adapters.transports.celery": (
        "inboxguard.adapters.celery.transport",
        ["CeleryTransport"],
    ),
    "inboxguard.adapters.transports.dramatiq": (
        "inboxguard.adapters.dramatiq.transport",
        ["DramatiqTransport"],
    ),
    "inboxguard.adapters.transports.kombu": (
        "inboxguard.adapters.kombu.transport",
        ["KombuTransport"],
    ),
}


def test_every_name_exported_before_is_still_exported() -> None:
    missing = [name for name in BEFORE if name not in inboxguard.__all__]
    assert missing == []
    for name in BEFORE:
        assert getattr(inboxguard, name) is not None


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_warns_and_gives_the_same_objects(old: str) -> None:
    """Imported fresh, the old module warns once, naming where to import from,
    and its names are the very objects of the new home."""
    new, names = MOVED[old]
    code = (
        "import importlib, warnings\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "msgs = [str(w.message) for w in seen if w.category is DeprecationWarning]\n"
        f"assert any({old!r} in m for m in msgs), msgs\n"
        f"for name in {names!r}:\n"
        "    assert getattr(old, name) is getattr(new, name), name\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_moved_modules_are_not_imported_by_the_package_itself() -> None:
    """``import inboxguard`` never triggers the deprecation warnings."""
    code = (
        "import sys, warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "import inboxguard, inboxguard.inbox, inboxguard.outbox\n"
        "import inboxguard.effects, inboxguard.cli\n"
        f"assert not set({sorted(MOVED)!r}) & set(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert importlib.import_module("inboxguard.inbox").Inbox is inboxguard.Inbox
