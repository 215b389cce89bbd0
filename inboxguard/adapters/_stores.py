"""The inboxes the adapters accept, and the local transaction each one
guards a delivery in.

An :class:`~inboxguard.Inbox` runs in a SQLAlchemy ``Session`` (the factory
opens one; the delivery runs in ``session.begin()``). A
:class:`~inboxguard.RedisInbox` runs in a transactional pipeline of the Redis
client the factory returns (the guard sends its ``EXEC``). Imports no
framework, and no redis.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeGuard

from inboxguard import Inbox, RedisInbox
from inboxguard.adapters._transaction import transaction as traced_begin

__all__ = ["INBOX_KINDS", "AnyInbox", "is_inbox", "transaction"]

AnyInbox = Inbox | RedisInbox

#: What an adapter says it needs when given something else.
INBOX_KINDS = "an inboxguard.Inbox or inboxguard.RedisInbox"


def is_inbox(inbox: object) -> TypeGuard[AnyInbox]:
    """Whether ``inbox`` is an inbox the adapters can guard deliveries with."""
    return isinstance(inbox, Inbox | RedisInbox)


@contextmanager
def transaction(
    inbox: AnyInbox, factory: Callable[[], Any], consumer: str, command_id: str
) -> Iterator[Any]:
    """One delivery's local transaction: a session of ``factory()`` in
    ``session.begin()`` whose commit is traced (closed afterwards), or, for a
    RedisInbox, a pipeline of ``factory()``'s client (the guard sends its
    ``EXEC``)."""
    if isinstance(inbox, RedisInbox):
        with factory().pipeline() as pipe:
            yield pipe
        return
    session = factory()  # not a context manager: a DjangoSession has begin() and close() only
    try:
        with traced_begin(session, inbox, consumer, command_id):
            yield session
    finally:
        session.close()
