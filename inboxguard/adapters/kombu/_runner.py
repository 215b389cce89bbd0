"""One kombu delivery's transaction: guard, handler, commit."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from typing import Any

from kombu.message import Message
from sqlalchemy.orm import Session

from inboxguard import InboxStore
from inboxguard.adapters._delivery import Delivery
from inboxguard.adapters._outcome import log_duplicate
from inboxguard.adapters._stores import transaction

__all__ = ["Runner"]

logger = logging.getLogger("inboxguard.kombu")


class Runner:
    """One delivery's transaction: guard, handler, commit."""

    def __init__(
        self,
        handler: Callable[[Any, Message], Any],
        inbox: InboxStore,
        session_factory: Callable[[], Session],
        command_id: Callable[[Delivery], Any],
        consumer: str,
        exclude: tuple[str, ...],
    ) -> None:
        self.handler = handler
        self.inbox = inbox
        self.session_factory = session_factory
        self.command_id = command_id
        self.consumer = consumer
        self.exclude = exclude

    def __call__(
        self,
        body: Any,
        message: Message,
        cid: str,
        sent_at: dt.datetime | None,
        details: Mapping[str, Any],
    ) -> None:
        with (
            transaction(self.inbox, self.session_factory, self.consumer, cid) as session,
            self.inbox.guard(
                session,
                consumer=self.consumer,
                command_id=cid,
                payload=body,
                exclude=self.exclude,
                sent_at=sent_at,
                details=details,
            ) as entry,
        ):
            if entry.duplicate:
                log_duplicate(logger, self.consumer, cid, "the message")
            else:
                entry.result = self.handler(body, message)
