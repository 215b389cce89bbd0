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

from sqlalchemy.ext.asyncio import async_sessionmaker
from sqlalchemy.orm import sessionmaker

from inboxguard import InboxStore
from inboxguard.adapters._transaction import transaction as traced_begin
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import is_inbox_store

__all__ = ["INBOX_KINDS", "check_pairing", "is_inbox", "transaction"]

#: What an adapter says it needs when given something else.
INBOX_KINDS = "an inboxguard.Inbox or inboxguard.RedisInbox"


def is_inbox(inbox: object) -> TypeGuard[InboxStore]:
    """Whether ``inbox`` is an inbox the adapters can guard deliveries with."""
    return is_inbox_store(inbox)


def check_pairing(inbox: object, factory: object, where: str) -> None:
    """Refuse a store and a session factory that cannot share a transaction.

    A Django store (``DjangoInbox``) claims on Django's connection, so its
    deliveries need ``session_factory=inbox.session``; a SQLAlchemy
    ``sessionmaker`` there would run the handler on another connection, and
    every delivery would be quarantined as ``configuration``. The reverse
    (an SQL inbox with a Django store's ``session``) fails the same way.

    Raises:
        ConfigurationError: naming the pairing and the factory to use.
    """
    django_store = is_inbox_store(inbox) and inbox.capabilities.store == "django"
    alchemy = isinstance(factory, sessionmaker | async_sessionmaker)
    django_factory = type(getattr(factory, "__self__", None)).__module__.startswith(
        "inboxguard.django"
    )
    if django_store and alchemy:
        msg = (
            f"{where}: a Django store ({type(inbox).__name__}) with a SQLAlchemy"
            f" {type(factory).__name__}: the claim runs on Django's connection and the"
            " handler on another, so nothing commits together; pass"
            " session_factory=inbox.session"
        )
        raise ConfigurationError(msg)
    if not django_store and django_factory:
        msg = (
            f"{where}: an SQL inbox ({type(inbox).__name__}) with a Django store's session"
            " factory: pass a sessionmaker of the inbox's engine, or use the Django store"
            " with its own session"
        )
        raise ConfigurationError(msg)


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
