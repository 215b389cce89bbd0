"""The transactional inbox: one commit per business command, in the caller's
own database transaction."""

from __future__ import annotations

from inboxguard.inbox._inbox import Inbox

__all__ = ["Inbox"]
