"""inboxguard: effectively-once message consumers.

The inbox records each business command's ID and payload digest in the same
database transaction as the consumer's own changes: both commit or neither
does. See ``docs/guarantees.md`` for exactly what holds, and where.
"""

from __future__ import annotations

from inboxguard._core.context import current_entry, current_session
from inboxguard._core.digest import digest_of
from inboxguard._core.guarantee import Guarantee, GuaranteeFact
from inboxguard._core.identity import command_id_for
from inboxguard._core.retention import RetentionPolicy
from inboxguard.dashboard import dashboard_app, observe_database
from inboxguard.effects import EffectLedger
from inboxguard.effects.contracts import known_contract
from inboxguard.effects.provider import (
    KEYS_KEPT_FOREVER,
    MismatchBehaviour,
    Provider,
    ProviderContract,
    Receipt,
)
from inboxguard.effects.state import EffectState
from inboxguard.errors import (
    BeyondRetentionError,
    CommandRejectedError,
    ConfigurationError,
    Disposition,
    EffectError,
    EffectOutcomeUnknownError,
    EffectPayloadConflictError,
    InboxGuardError,
    InProgressError,
    InvalidCommandError,
    InvalidTransitionError,
    MissingSentTimeError,
    NoActiveGuardError,
    OutboxPayloadConflictError,
    PayloadConflictError,
    PayloadEncodingError,
    PayloadMismatchError,
    ProviderRejectedError,
    ReceiptTooLargeError,
    ReconciliationRequiredError,
    RetentionMisalignedError,
    StaleLeaseError,
    UnroutableMessageError,
    UnsupportedDialectError,
)
from inboxguard.guarantees import (
    contradictions_of,
    guarantees_markdown,
    guarantees_of,
    lock_changes,
    lock_text,
    read_lock,
)
from inboxguard.inbox import (
    BatchCommand,
    BatchEntry,
    Inbox,
    InboxBatch,
    InboxEntry,
    InboxStore,
    PurgeReport,
    QuarantineReason,
    StoreCapabilities,
)
from inboxguard.inbox.redis import RedisDurabilityWarning, RedisInbox
from inboxguard.operations import (
    explain,
    quarantine_count,
    quarantine_list,
    quarantine_show,
    release_quarantine,
    resolve_quarantine,
    stats,
)
from inboxguard.outbox import (
    Dispatcher,
    Outbox,
    OutboxMessage,
)
from inboxguard.sql.clock import ServerClock
from inboxguard.sql.errors import is_retryable

__version__ = "0.1.0"

__all__ = [
    "KEYS_KEPT_FOREVER",
    "BatchCommand",
    "BatchEntry",
    "BeyondRetentionError",
    "CommandRejectedError",
    "ConfigurationError",
    "Dispatcher",
    "Disposition",
    "EffectError",
    "EffectLedger",
    "EffectOutcomeUnknownError",
    "EffectPayloadConflictError",
    "EffectState",
    "Guarantee",
    "GuaranteeFact",
    "InProgressError",
    "Inbox",
    "InboxBatch",
    "InboxEntry",
    "InboxGuardError",
    "InboxStore",
    "InvalidCommandError",
    "InvalidTransitionError",
    "MismatchBehaviour",
    "MissingSentTimeError",
    "NoActiveGuardError",
    "Outbox",
    "OutboxMessage",
    "OutboxPayloadConflictError",
    "PayloadConflictError",
    "PayloadEncodingError",
    "PayloadMismatchError",
    "Provider",
    "ProviderContract",
    "ProviderRejectedError",
    "PurgeReport",
    "QuarantineReason",
    "Receipt",
    "ReceiptTooLargeError",
    "ReconciliationRequiredError",
    "RedisDurabilityWarning",
    "RedisInbox",
    "RetentionMisalignedError",
    "RetentionPolicy",
    "ServerClock",
    "StaleLeaseError",
    "StoreCapabilities",
    "UnroutableMessageError",
    "UnsupportedDialectError",
    "command_id_for",
    "contradictions_of",
    "current_entry",
    "current_session",
    "dashboard_app",
    "digest_of",
    "explain",
    "guarantees_markdown",
    "guarantees_of",
    "is_retryable",
    "known_contract",
    "lock_changes",
    "lock_text",
    "observe_database",
    "quarantine_count",
    "quarantine_list",
    "quarantine_show",
    "read_lock",
    "release_quarantine",
    "resolve_quarantine",
    "stats",
]
