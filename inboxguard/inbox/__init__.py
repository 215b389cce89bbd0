"""The transactional inbox: one commit per business command, in the caller's
own database transaction."""

from __future__ import annotations

from inboxguard.inbox._batch import BatchCommand, BatchEntry, InboxBatch
from inboxguard.inbox._inbox import Inbox
from inboxguard.inbox._purge import PurgePlan, PurgeReport
from inboxguard.inbox._quarantine import QuarantineAction, QuarantineReplay
from inboxguard.inbox._records import InboxEntry, InboxRecord, QuarantineReason, QuarantineRecord

__all__ = [
    "BatchCommand",
    "BatchEntry",
    "Inbox",
    "InboxBatch",
    "InboxEntry",
    "InboxRecord",
    "PurgePlan",
    "PurgeReport",
    "QuarantineAction",
    "QuarantineReason",
    "QuarantineRecord",
    "QuarantineReplay",
]
