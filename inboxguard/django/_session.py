"""The Django database alias a store writes on, as a session-like object."""

from __future__ import annotations

from typing import Any

from inboxguard.errors import ConfigurationError

__all__ = ["DjangoSession", "alias_of"]


class DjangoSession:
    """A Django database alias for code written against a session factory
    (the Celery task): ``begin()`` opens ``transaction.atomic(using=alias)``,
    ``close()`` drops the connection if it is broken or past its
    ``CONN_MAX_AGE``. :func:`inboxguard.current_session` returns it inside a
    guard."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def __repr__(self) -> str:
        """Show the alias."""
        return f"<DjangoSession {self.alias!r}>"

    def begin(self) -> Any:
        """``transaction.atomic(using=alias)``."""
        from django.db import transaction

        return transaction.atomic(using=self.alias)

    @property
    def connection(self) -> Any:
        """The Django connection of this alias in the current thread."""
        from django.db import connections

        return connections[self.alias]

    def close(self) -> None:
        """Close the connection if it is unusable or obsolete (as Django does
        after each request)."""
        self.connection.close_if_unusable_or_obsolete()


def alias_of(session: object, default: str, what: str) -> str:
    """The alias a guard or an add runs on: its own, or the session's."""
    if session is None:
        return default
    if isinstance(session, DjangoSession):
        if session.alias != default:
            msg = (
                f"{what} was given a session of database {session.alias!r}, but this store"
                f" writes to {default!r}: use the store built for that alias"
            )
            raise ConfigurationError(msg)
        return default
    msg = (
        f"{what} runs on the connection of the current transaction.atomic() block; call"
        f" it without a session (or with store.session()), got {type(session).__name__}"
    )
    raise ConfigurationError(msg)
