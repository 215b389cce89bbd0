"""The transactional inbox: one commit per business command, in the caller's
own database transaction."""

from __future__ import annotations

from inboxguard.inbox._batch import BatchCommand, BatchEntry, InboxBatch
from inboxguard.inbox._inbox import Inbox
from inboxguard.inbox._purge import PurgePlan, PurgeReport
from inboxguard.inbox._quarantine import QuarantineAction, QuarantineReplay
from inboxguard.inbox._records import InboxEntry, InboxRecord, QuarantineReason, QuarantineRecord
from inboxguard.inbox._store import (
    InboxStore,
    SqlInboxStore,
    StoreCapabilities,
    is_inbox_store,
    is_sql_store,
)

__all__ = [
    "BatchCommand",
    "BatchEntry",
    "Inbox",
    "InboxBatch",
    "InboxEntry",
    "InboxRecord",
    "InboxStore",
    "PurgePlan",
    "PurgeReport",
    "QuarantineAction",
    "QuarantineReason",
    "QuarantineRecord",
    "QuarantineReplay",
    "SqlInboxStore",
    "StoreCapabilities",
    "is_inbox_store",
    "is_sql_store",
]
