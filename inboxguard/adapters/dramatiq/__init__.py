"""Dramatiq adapter: :class:`InboxMiddleware` runs guarded actors once per
business command.

Usage::

    broker.add_middleware(InboxMiddleware(inbox, session_factory=sessionmaker(engine)))

    @dramatiq.actor(inbox_command_id="order_id", inbox_consumer="orders.ship")
    def ship(order_id: str, address: str) -> dict:
        session = inboxguard.current_session()
        ...

See ``docs/adapters/dramatiq.md`` for the recipe and its guarantees.
"""

from __future__ import annotations

from inboxguard.adapters.dramatiq._middleware import InboxMiddleware

__all__ = ["InboxMiddleware"]
