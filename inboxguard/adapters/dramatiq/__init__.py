"""Dramatiq adapter: :class:`InboxMiddleware` runs each actor's command once.

The outbox transport for Dramatiq lives in :mod:`inboxguard.adapters.dramatiq.transport`.
"""

from __future__ import annotations

from inboxguard.adapters.dramatiq._middleware import InboxMiddleware

__all__ = ["InboxMiddleware"]
