"""The guarded block's edge on a Django connection, as
:mod:`inboxguard.sql.boundary` is on a SQLAlchemy one.

- the claim and the block run in a nested ``transaction.atomic()`` of the
  guard's own (a savepoint). When the block exits by an exception, Django
  rolls back to it: neither the claim nor the block's changes survive, even
  when the caller catches the error inside its own ``atomic()`` and lets it
  commit;
- while the block runs, an execute wrapper on the block's connection refuses,
  before it runs, every statement the database says would end the
  transaction (a raw ``COMMIT``, MariaDB's implicitly committing DDL), and
  one on every other alias's connection refuses statements that write: those
  would commit in another transaction than the claim's. The refusal raises
  ``ConfigurationError`` in the block and is remembered, so the exit fails;
- at a normal exit the savepoint is released (``RELEASE SAVEPOINT``, the
  database's word that the transaction still holds the claim). When that
  fails, or the block did not keep its transaction, the whole ``atomic()``
  block of the caller is marked for rollback (``set_rollback(True)``): what
  the block wrote after the break never commits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from inboxguard.django._atomic import driver_in_transaction
from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects import database_for
from inboxguard.sql.dialects.base.boundary import leading_words

__all__ = ["DjangoBoundary"]

#: First words of statements that change data or schema (refused on other aliases).
_WRITES = frozenset(
    {
        "INSERT",
        "UPDATE",
        "DELETE",
        "REPLACE",
        "MERGE",
        "UPSERT",
        "CREATE",
        "ALTER",
        "DROP",
        "TRUNCATE",
        "RENAME",
        "COPY",
        "CALL",
        "LOAD",
        "GRANT",
        "REVOKE",
    }
)


def _writes(sql: str) -> bool:
    for words in leading_words(sql, 1):
        if words[0] in _WRITES:
            return True
        if words[0] == "WITH" and any(w in sql.upper() for w in ("INSERT", "UPDATE", "DELETE")):
            return True
    return False


class DjangoBoundary:
    """The guard's own savepoint on ``alias`` and the refusals while its block runs."""

    __slots__ = ("_alias", "_atomic", "_ends", "_label", "_stack", "refused")

    def __init__(self, alias: str, sa_dialect: Any) -> None:
        from django.db import transaction

        self._alias = alias
        self._ends: Callable[[str], bool] = database_for(sa_dialect).ends_transaction
        self._atomic = transaction.atomic(using=alias, savepoint=True)
        self._atomic.__enter__()
        self._stack = contextlib.ExitStack()
        self._label = "the command"
        #: How the block tried to end the transaction, once refused (else None).
        self.refused: str | None = None

    def watch(self, label: str) -> None:
        """Refuse, until :meth:`unwatch`, what would split the claim from the block."""
        from django.db import connections

        self._label = label
        for alias in connections:
            wrapper = self._on_own if alias == self._alias else self._on_other(alias)
            self._stack.enter_context(connections[alias].execute_wrapper(wrapper))

    def unwatch(self) -> None:
        """Stop refusing (before the guard's own release or rollback)."""
        self._stack.close()

    def release(self) -> None:
        """Release the savepoint after a normal exit; the caller's block is
        marked for rollback, and ConfigurationError raised, when the database
        no longer knows it."""
        from django.db import DatabaseError

        try:
            self._atomic.__exit__(None, None, None)
        except DatabaseError as error:
            self.doom()
            msg = (
                f"the transaction holding the claim of {self._label} ended inside the"
                " guarded block: the database no longer knows the guard's savepoint (a"
                " commit or rollback on the driver connection, or a transaction the server"
                " rolled back, such as a deadlock on MariaDB/MySQL). The atomic() block is"
                " marked for rollback and nothing of the guarded block commits"
            )
            raise ConfigurationError(msg) from error

    def abandon(self, error: BaseException | None, kept: bool) -> None:
        """Roll back to the savepoint (Django's nested ``atomic()`` exit with
        ``error``); when the transaction did not outlive the block, mark the
        caller's block for rollback too."""
        failure = error if error is not None else RuntimeError("guard abandoned")
        self._atomic.__exit__(type(failure), failure, failure.__traceback__)
        if not kept:
            self.doom()

    def doom(self) -> None:
        """Mark the caller's ``atomic()`` block for rollback."""
        from django.db import transaction

        with contextlib.suppress(Exception):
            transaction.set_rollback(True, using=self._alias)

    def _refuse(self, route: str) -> None:
        self.refused = route
        msg = (
            f"inboxguard refused {route} inside the guarded block of {self._label}: it would"
            " split the claim from the block's changes, so the command could be lost or"
            " applied twice. Never commit inside the block (the caller's atomic() commits"
            " after it), and write only through the inbox's database: put the inbox tables"
            " on the handler's database (INBOXGUARD['DATABASE']). Nothing of this block"
            " will commit"
        )
        raise ConfigurationError(msg)

    def _on_own(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self._ends(sql):
            self._refuse(f"the statement {sql.strip()[:60]!r}")
        if not driver_in_transaction(context["connection"].connection):
            # A commit or rollback on the driver connection ended the claim's
            # transaction; in Django's autocommit mode this write would commit alone.
            self._refuse(f"the statement {sql.strip()[:60]!r} after the transaction ended")
        return execute(sql, params, many, context)

    def _on_other(self, alias: str) -> Any:
        def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            if _writes(sql):
                self._refuse(f"a write through the database alias {alias!r}")
            return execute(sql, params, many, context)

        return wrapper
