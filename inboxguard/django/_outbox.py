"""The Django outbox: :class:`DjangoOutbox`, the library's own
:class:`~inboxguard.Outbox` writing its rows on the connection of the caller's
``transaction.atomic()`` block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Outbox
from inboxguard.django._atomic import atomic_connection
from inboxguard.django._config import check_alias, engine_for, store_settings
from inboxguard.django._driver import runner_for
from inboxguard.django._session import DjangoSession, alias_of

__all__ = ["DjangoOutbox"]


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
        alias = alias_of(session, self.database, "outbox.add()")
        values = self._row_values(command_id, destination, payload, headers)
        connection = atomic_connection(alias, "outbox.add()")
        return self._store_row(runner_for(connection), values, payload)  # type: ignore[arg-type]
