"""What one message's delivery needs from the middleware guarding it.

:class:`~._flow.Delivery` and :class:`~._kafka_batch.KafkaBatch` are given
the middleware as a :class:`Guard`: the store, the redelivery policy, the
session factories, the sent-time rule, the settlement table's verdict on a
subscriber, and the quarantine writer. Both sit below ``_middleware``,
which builds them, so no module of the adapter imports its own caller.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from inboxguard.adapters._evidence import Refused
from inboxguard.adapters._redelivery import Redelivery
from inboxguard.adapters._sent_time import SentTimeCheck
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import InboxStore

__all__ = ["Guard"]


class Guard(Protocol):
    """The middleware, as a delivery sees it (``InboxMiddleware`` is one)."""

    @property
    def inbox(self) -> InboxStore:
        """The store holding the evidence."""

    @property
    def policy(self) -> Redelivery:
        """The shared redelivery cap and retry delay."""

    @property
    def session_factory(self) -> Callable[[], Any] | None:
        """Opens a sync ``Session`` per message (or None: the async one does)."""

    @property
    def async_session_factory(self) -> Callable[[], AsyncSession] | None:
        """Opens an ``AsyncSession`` per message (or None: the sync one does)."""

    def sent_check(self, consumer: str) -> SentTimeCheck:
        """The sent-time rule of ``consumer``."""

    def refusal_of(self, subscriber: Any) -> ConfigurationError | None:
        """Why the settlement table refuses ``subscriber`` (None: it accepts it)."""

    async def record(self, error: BaseException, refused: Refused, reason: str | None) -> bool:
        """Whether a quarantine record now holds the delivery."""
