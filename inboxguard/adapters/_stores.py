"""The inboxes the adapters accept, and the local transaction each one
guards a delivery in.

The adapters take any :class:`~inboxguard.InboxStore` and open a delivery's
transaction as the store declares (``capabilities.transaction``): a session
of the factory in ``session.begin()`` (a SQLAlchemy ``Session``, or a
``DjangoSession`` whose ``begin()`` is ``atomic()``), or a transactional
pipeline of the Redis client the factory returns (the guard sends its
``EXEC``). Imports no framework, and no redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeGuard

from inboxguard import InboxStore, is_inbox_store
from inboxguard.adapters._transaction import transaction as traced_begin

__all__ = ["INBOX_KINDS", "is_inbox", "transaction"]

#: What an adapter says it needs when given something else.
INBOX_KINDS = "an inboxguard.Inbox or inboxguard.RedisInbox"


def is_inbox(inbox: object) -> TypeGuard[InboxStore]:
    """Whether ``inbox`` is an inbox the adapters can guard deliveries with."""
    return is_inbox_store(inbox)


@contextmanager
def transaction(
    inbox: InboxStore, factory: Callable[[], Any], consumer: str, command_id: str
) -> Iterator[Any]:
    """One delivery's local transaction: a session of ``factory()`` in
    ``session.begin()`` whose commit is traced (closed afterwards), or, for a
    store guarding in a pipeline, a pipeline of ``factory()``'s client (the
    guard sends its ``EXEC``)."""
    if inbox.capabilities.transaction == "pipeline":
        with factory().pipeline() as pipe:
            yield pipe
        return
    session = factory()  # not a context manager: a DjangoSession has begin() and close() only
    try:
        with traced_begin(session, inbox, consumer, command_id):
            yield session
    finally:
        session.close()
