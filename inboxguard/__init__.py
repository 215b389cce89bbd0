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
from inboxguard._core.retention import RetentionPolicy, WindowRow
from inboxguard.dashboard import dashboard_app, observe_database
from inboxguard.effects import EffectLedger, EffectRecord, EffectTransition, ReconcileReport
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
    Contradiction,
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
    InboxRecord,
    PurgePlan,
    PurgeReport,
    QuarantineAction,
    QuarantineReason,
    QuarantineRecord,
    QuarantineReplay,
)
from inboxguard.inbox.redis import RedisDurability, RedisInbox
from inboxguard.operations import (
    CommandExplanation,
    ConsumerStats,
    EffectStats,
    OutboxStats,
    QuarantineDetail,
    Stats,
    explain,
    quarantine_count,
    quarantine_list,
    quarantine_show,
    release_quarantine,
    resolve_quarantine,
    stats,
)
from inboxguard.outbox import (
    CompactionResult,
    Dispatcher,
    DispatchStats,
    Outbox,
    OutboxMessage,
    OutboxRow,
    OutboxStatus,
)
from inboxguard.sql.clock import ServerClock
from inboxguard.sql.errors import is_retryable

__version__ = "0.1.0"

__all__ = [
    "KEYS_KEPT_FOREVER",
    "BatchCommand",
    "BatchEntry",
    "BeyondRetentionError",
    "CommandExplanation",
    "CommandRejectedError",
    "CompactionResult",
    "ConfigurationError",
    "ConsumerStats",
    "Contradiction",
    "DispatchStats",
    "Dispatcher",
    "Disposition",
    "EffectError",
    "EffectLedger",
    "EffectOutcomeUnknownError",
    "EffectPayloadConflictError",
    "EffectRecord",
    "EffectState",
    "EffectStats",
    "EffectTransition",
    "Guarantee",
    "GuaranteeFact",
    "InProgressError",
    "Inbox",
    "InboxBatch",
    "InboxEntry",
    "InboxGuardError",
    "InboxRecord",
    "InvalidCommandError",
    "InvalidTransitionError",
    "MismatchBehaviour",
    "MissingSentTimeError",
    "NoActiveGuardError",
    "Outbox",
    "OutboxMessage",
    "OutboxPayloadConflictError",
    "OutboxRow",
    "OutboxStats",
    "OutboxStatus",
    "PayloadConflictError",
    "PayloadEncodingError",
    "PayloadMismatchError",
    "Provider",
    "ProviderContract",
    "ProviderRejectedError",
    "PurgePlan",
    "PurgeReport",
    "QuarantineAction",
    "QuarantineDetail",
    "QuarantineReason",
    "QuarantineRecord",
    "QuarantineReplay",
    "Receipt",
    "ReceiptTooLargeError",
    "ReconcileReport",
    "ReconciliationRequiredError",
    "RedisDurability",
    "RedisInbox",
    "RetentionMisalignedError",
    "RetentionPolicy",
    "ServerClock",
    "StaleLeaseError",
    "Stats",
    "UnroutableMessageError",
    "UnsupportedDialectError",
    "WindowRow",
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
