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
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager, nullcontext
from typing import Any

from inboxguard import InboxStore
from inboxguard._core.context import adapter_settles_var, entry_var
from inboxguard._telemetry import OUTCOME, telemetry_for

__all__ = ["transaction", "transaction_async"]


@contextmanager
def transaction(session: Any, inbox: InboxStore, consumer: str, command_id: str) -> Iterator[None]:
    """``with session.begin():`` whose commit is traced as ``inboxguard.commit``."""
    begun = session.begin()
    begun.__enter__()
    settling = adapter_settles_var.set(True)
    try:
        try:
            yield
        except BaseException:
            if not begun.__exit__(*sys.exc_info()):
                raise
            return
        with _commit_span(inbox, consumer, command_id):
            begun.__exit__(None, None, None)
    finally:
        adapter_settles_var.reset(settling)


@asynccontextmanager
async def transaction_async(
    session: Any, inbox: InboxStore, consumer: str, command_id: str
) -> AsyncIterator[None]:
    """:func:`transaction` for an ``AsyncSession``."""
    begun = session.begin()
    await begun.__aenter__()
    settling = adapter_settles_var.set(True)
    try:
        try:
            yield
        except BaseException:
            if not await begun.__aexit__(*sys.exc_info()):
                raise
            return
        with _commit_span(inbox, consumer, command_id):
            await begun.__aexit__(None, None, None)
    finally:
        adapter_settles_var.reset(settling)


def _commit_span(inbox: InboxStore, consumer: str, command_id: str) -> AbstractContextManager[None]:
    """The commit's span, with the outcome of the guard that ran in this
    transaction (``fresh`` or ``duplicate``)."""
    telemetry = telemetry_for(getattr(inbox, "telemetry", False))
    if not telemetry.enabled:
        return nullcontext()
    entry = entry_var.get(None)
    same = entry is not None and (entry.consumer, entry.command_id) == (consumer, command_id)
    outcome = {OUTCOME: "duplicate" if entry.duplicate else "fresh"} if same else {}
    return telemetry.span("inboxguard.commit", consumer, command_id, **outcome)
