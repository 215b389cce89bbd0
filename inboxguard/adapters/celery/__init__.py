"""Celery adapter: a task that runs once per business command.

``inbox_task(inbox, session_factory=..., command_id=...)`` (or
``@app.task(base=InboxTask, ...)``) begins a transaction, claims the command in
the inbox, runs the body, stores its result and commits; only then does the
worker ack the message (``acks_late``). Importing this module connects two
signal receivers: ``before_task_publish`` stamps ``x-inbox-sent-at`` on
every published task, and
``celeryd_after_setup`` refuses to start a worker whose guarded tasks are
misdeclared or ack failed deliveries, whose database lacks the inbox tables,
or whose replay windows outlive an inbox's evidence horizon.
"""

from __future__ import annotations

from inboxguard.adapters.celery._dead_letters import dead_letter_findings
from inboxguard.adapters.celery._decorator import inbox_task
from inboxguard.adapters.celery._startup import (
    REPLAY_WINDOWS_SETTING,
    ReplayWindows,
    check_alignment,
    check_worker,
    install_receivers,
    replay_windows,
    stamp_sent_at,
)
from inboxguard.adapters.celery._task import SENT_AT_HEADER, InboxTask

__all__ = [
    "REPLAY_WINDOWS_SETTING",
    "SENT_AT_HEADER",
    "InboxTask",
    "ReplayWindows",
    "check_alignment",
    "check_worker",
    "dead_letter_findings",
    "inbox_task",
    "install_receivers",
    "replay_windows",
    "stamp_sent_at",
]

install_receivers()
