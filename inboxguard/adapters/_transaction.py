"""The transaction of one guarded delivery, with its commit traced.

Every adapter opens a delivery's transaction here instead of calling
``session.begin()`` itself: the block runs exactly as inside ``with
session.begin():`` (commit on a normal exit, rollback on an exception), and
the commit runs inside the ``inboxguard.commit`` span. The claim and handler
spans come from the guard itself (``inboxguard.inbox``), so all three are
recorded once, for every adapter.

Imports no framework.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from inboxguard import Inbox
from inboxguard._telemetry import telemetry_for

__all__ = ["transaction", "transaction_async"]


@contextmanager
def transaction(session: Any, inbox: Inbox, consumer: str, command_id: str) -> Iterator[None]:
    """``with session.begin():`` whose commit is traced as ``inboxguard.commit``."""
    begun = session.begin()
    begun.__enter__()
    try:
        yield
    except BaseException:
        if not begun.__exit__(*sys.exc_info()):
            raise
        return
    with telemetry_for(inbox.telemetry).span("inboxguard.commit", consumer, command_id):
        begun.__exit__(None, None, None)


@asynccontextmanager
async def transaction_async(
    session: Any, inbox: Inbox, consumer: str, command_id: str
) -> AsyncIterator[None]:
    """:func:`transaction` for an ``AsyncSession``."""
    begun = session.begin()
    await begun.__aenter__()
    try:
        yield
    except BaseException:
        if not await begun.__aexit__(*sys.exc_info()):
            raise
        return
    with telemetry_for(inbox.telemetry).span("inboxguard.commit", consumer, command_id):
        await begun.__aexit__(None, None, None)
