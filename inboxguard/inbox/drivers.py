"""What a store outside SQLAlchemy's session needs to drive the guard's flow.

The guard's decisions live in one sans-I/O flow (:class:`GuardFlows`); a
driver only performs the requests it yields (:class:`Connect`,
:class:`Execute`, :class:`WriteQuarantine`, :class:`HandOver`) and reports
how the caller's block ended (:class:`BlockExit`). The sync and asyncio
drivers for SQLAlchemy live beside the flow; this module names the pieces a
third driver (the Django store) performs the same flow with, and the
handler decorator it wraps its guard in, so that it never re-implements a
decision.
"""

from __future__ import annotations

from inboxguard.inbox._drive import handler_span, quarantine_sync
from inboxguard.inbox._flow import (
    SQLALCHEMY_BOUNDARY,
    BlockExit,
    BoundaryAdvice,
    Connect,
    Execute,
    GuardFlow,
    GuardFlows,
    HandOver,
    Request,
    WriteQuarantine,
    resume,
    unexpected,
)
from inboxguard.inbox._handlers import SentAtSpec, registering, sync_handler
from inboxguard.inbox._quarantine import log_not_written, log_write_failure

__all__ = [
    "SQLALCHEMY_BOUNDARY",
    "BlockExit",
    "BoundaryAdvice",
    "Connect",
    "Execute",
    "GuardFlow",
    "GuardFlows",
    "HandOver",
    "Request",
    "SentAtSpec",
    "WriteQuarantine",
    "handler_span",
    "log_not_written",
    "log_write_failure",
    "quarantine_sync",
    "registering",
    "resume",
    "sync_handler",
    "unexpected",
]
