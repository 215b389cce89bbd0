"""The Django store: :class:`DjangoInbox` and :class:`DjangoOutbox`.

Both are the library's own :class:`~inboxguard.Inbox` and
:class:`~inboxguard.Outbox` with one difference: their rows are written on
the connection of the caller's ``transaction.atomic()`` block instead of a
SQLAlchemy session. The guard runs the same flow as the SQLAlchemy inbox
(:mod:`._driver`); what runs in transactions of its own (quarantine records,
purge, lookups, the dispatcher) goes through a SQLAlchemy engine on the same
database (:func:`~inboxguard.django._config.engine_for`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, InboxEntry, Outbox, RetentionPolicy
from inboxguard._core.clock import Clock
from inboxguard._telemetry import telemetry_for
from inboxguard.django._atomic import atomic_connection
from inboxguard.django._config import check_alias, engine_for, store_settings
from inboxguard.django._driver import DJANGO_BOUNDARY, drive_django, runner_for
from inboxguard.errors import ConfigurationError
from inboxguard.inbox.drivers import GuardFlows

__all__ = ["DjangoInbox", "DjangoOutbox", "DjangoSession"]

#: Default bound on waiting for another transaction's claim (as :class:`Inbox`).
DEFAULT_LOCK_TIMEOUT = dt.timedelta(seconds=5)
_NO_ASYNC = (
    "DjangoInbox runs on Django's synchronous connection, whose atomic() blocks are"
    " per thread; call guard() from synchronous code (in an async view, wrap it in"
    " asgiref's sync_to_async)"
)


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


def _alias_of(session: object, default: str, what: str) -> str:
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


class DjangoInbox(Inbox):
    """The inbox on Django's connection: the guard claims inside the caller's
    ``transaction.atomic()`` block, so the evidence commits if and only if the
    block's changes commit.

    Decisions, errors, quarantine records (written in a transaction of their
    own, they survive the block's rollback), retention checks and purge are
    those of :class:`~inboxguard.Inbox`, on the same tables.

    Args:
        retention: the evidence horizon (default: ``INBOXGUARD["RETENTION"]``).
        database: the Django database alias (default:
            ``INBOXGUARD["DATABASE"]``, else ``"default"``).
        table_prefix: default ``INBOXGUARD["TABLE_PREFIX"]``, else ``"inboxguard_"``.
        lock_timeout: as :class:`~inboxguard.Inbox`.
        clock: as :class:`~inboxguard.Inbox`.
        engine: the SQLAlchemy engine for transactions of the store's own
            (default: built from the alias's ``DATABASES`` entry).

    Raises:
        ConfigurationError: a setting cannot keep the guarantees.
    """

    def __init__(
        self,
        *,
        retention: RetentionPolicy | dt.timedelta | None = None,
        database: str | None = None,
        table_prefix: str | None = None,
        lock_timeout: dt.timedelta | None = DEFAULT_LOCK_TIMEOUT,
        clock: Clock | None = None,
        engine: Engine | None = None,
        telemetry: bool = True,
    ) -> None:
        conf = store_settings(require_retention=retention is None)
        alias = check_alias(conf.database if database is None else database, "database")
        found = conf.retention if retention is None else RetentionPolicy.coerce(retention)
        assert found is not None
        super().__init__(
            engine_for(alias) if engine is None else engine,
            retention=found,
            table_prefix=conf.table_prefix if table_prefix is None else table_prefix,
            lock_timeout=lock_timeout,
            clock=clock,
            telemetry=telemetry,
        )
        self.database = alias
        self._flows = GuardFlows(
            self.tables,
            self.retention,
            self.clock,
            lock_timeout,
            boundary=DJANGO_BOUNDARY,
            telemetry=telemetry_for(telemetry),
        )

    def __repr__(self) -> str:
        """Show the alias, prefix and retention."""
        return f"<DjangoInbox {self.database!r} {self.table_prefix!r} {self.retention}>"

    def session(self) -> DjangoSession:
        """A :class:`DjangoSession` of this inbox's database: pass
        ``session_factory=inbox.session`` to the Celery adapter."""
        return DjangoSession(self.database)

    @contextmanager
    def guard(
        self,
        session: Session | Connection | DjangoSession | None = None,
        *,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str] = (),
        sent_at: dt.datetime | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> Iterator[InboxEntry]:
        """Claim ``command_id`` for ``consumer`` in the current ``atomic()`` block.

        The contract of :meth:`inboxguard.Inbox.guard`, on the connection of
        the block of this inbox's database: the claim and the block's writes
        commit or roll back together, with the block.

        Raises:
            ConfigurationError: outside ``transaction.atomic()`` (Django's
                autocommit would commit the claim alone), in a block already
                marked for rollback, or, at the block's exit, the transaction
                was committed, rolled back or marked for rollback inside it;
                and every error of :meth:`inboxguard.Inbox.guard`.
        """
        alias = _alias_of(session, self.database, "inbox.guard()")
        flow = self._flows.guard(consumer, command_id, payload, exclude, sent_at, details)
        shown = session if session is not None else DjangoSession(alias)
        with drive_django(
            flow, alias, self.engine, shown, "inbox.guard()", self._flows.telemetry
        ) as entry:
            yield entry

    def guard_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: Django's atomic blocks are synchronous (see :meth:`guard`).

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_ASYNC)

    def handler_async(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused, as :meth:`guard_async`.

        Raises:
            ConfigurationError: always.
        """
        raise ConfigurationError(_NO_ASYNC)


class DjangoOutbox(Outbox):
    """The outbox on Django's connection: :meth:`add` writes the row in the
    caller's ``transaction.atomic()`` block, so it commits if and only if the
    business change commits, and survives a crash right after the commit
    (which ``transaction.on_commit`` does not). The existing
    :class:`~inboxguard.Dispatcher` delivers it, reading the same table
    through :attr:`engine`.

    Args:
        database: the Django database alias (default:
            ``INBOXGUARD["DATABASE"]``, else ``"default"``).
        table_prefix: default ``INBOXGUARD["TABLE_PREFIX"]``, else ``"inboxguard_"``.
        engine: the SQLAlchemy engine of the dispatcher and the operators'
            reads (default: built from the alias's ``DATABASES`` entry).
        **options: the other arguments of :class:`~inboxguard.Outbox`.

    Raises:
        ConfigurationError: as :class:`~inboxguard.Outbox`.
    """

    def __init__(
        self,
        *,
        database: str | None = None,
        table_prefix: str | None = None,
        engine: Engine | None = None,
        **options: Any,
    ) -> None:
        conf = store_settings(require_retention=False)
        alias = check_alias(conf.database if database is None else database, "database")
        super().__init__(
            engine_for(alias) if engine is None else engine,
            table_prefix=conf.table_prefix if table_prefix is None else table_prefix,
            **options,
        )
        self.database = alias

    def add(
        self,
        session: Session | Connection | DjangoSession | None = None,
        *,
        command_id: str,
        destination: str,
        payload: object,
        headers: Mapping[str, Any] | None = None,
    ) -> bool:
        """Store a command in the current ``atomic()`` block; never commits.

        The contract of :meth:`inboxguard.Outbox.add` on Django's connection.

        Raises:
            ConfigurationError: outside ``transaction.atomic()`` or in a block
                already marked for rollback; and every error of
                :meth:`inboxguard.Outbox.add`.
        """
        alias = _alias_of(session, self.database, "outbox.add()")
        values = self._row_values(command_id, destination, payload, headers)
        connection = atomic_connection(alias, "outbox.add()")
        return self._store_row(runner_for(connection), values, payload)  # type: ignore[arg-type]
