"""The inbox's statements: what every database must provide for the inbox.

A dialect turns the inbox's operations into statements for one database.
Multi-statement operations are written *sans I/O*: :meth:`InboxStatements.claim` and
:meth:`Watermark.advance` are generators that yield ``(statement,
parameters)`` pairs and receive each statement's result, so the same decision
logic drives a sync :class:`~sqlalchemy.engine.Connection` (:func:`drive`) and
an :class:`~sqlalchemy.ext.asyncio.AsyncConnection` without being written twice.

The shapes two databases share (``INSERT ... ON CONFLICT``, spoken by
PostgreSQL and SQLite) are written here once; each database's module says
which one it uses.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy import Executable, Table, and_, bindparam, select, update
from sqlalchemy.engine import Connection, Result
from sqlalchemy.engine import Dialect as SaDialect

from inboxguard._core.identity import named_commands
from inboxguard.errors import InProgressError
from inboxguard.sql.direct import execute
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime

__all__ = [
    "CLAIM_ATTEMPTS",
    "Claim",
    "ClaimSteps",
    "InboxStatements",
    "OnConflictWatermark",
    "Step",
    "Steps",
    "Watermark",
    "claim_vanished_error",
    "drive",
    "on_conflict_quarantine",
]

_T = TypeVar("_T")
#: How many times a claim tries when the row it conflicted with keeps vanishing.
CLAIM_ATTEMPTS = 3
#: One statement to run, with its parameters.
Step = tuple[Executable, Mapping[str, Any]]
#: A sans-I/O statement sequence: yields steps, receives their results, returns a value.
Steps = Generator[Step, Result[Any], _T]
#: The claim protocol: yields steps, receives their results, returns a Claim.
ClaimSteps = Generator[Step, Result[Any], "Claim"]


def drive(conn: Connection, steps: Steps[_T]) -> _T:
    """Run a statement sequence on a sync connection and return its value."""
    try:
        stmt, params = next(steps)
        while True:
            stmt, params = steps.send(execute(conn, stmt, params))
    except StopIteration as done:
        value: _T = done.value
        return value


def claim_vanished_error(consumer: str, command_ids: Sequence[str]) -> InProgressError:
    """The error of a claim (of one command, or of a batch's) whose conflicting
    rows were deleted before they could be read on every one of its
    :data:`CLAIM_ATTEMPTS` tries."""
    one = len(command_ids) == 1
    msg = (
        f"the evidence {'row' if one else 'rows'} of {named_commands(command_ids)} of consumer"
        f" {consumer!r} {'was' if one else 'were'} deleted between the claim's insert and its"
        f" read {CLAIM_ATTEMPTS} times in a row (a purge or an operator deleting"
        f" {'it' if one else 'them'} concurrently); nothing was applied: roll back and deliver"
        " it again later"
    )
    return InProgressError(msg, consumer=consumer, command_id=command_ids[0])


@dataclass(frozen=True, slots=True)
class Claim:
    """What the claim found: a fresh row of ours, or the stored evidence."""

    fresh: bool
    stored_digest: str
    result_json: str | None = None
    result_expires_at: dt.datetime | None = None


class InboxStatements(ABC):
    """The inbox's statements on one database, built once per table prefix:
    the claim, the result store and the quarantine upsert."""

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        self.tables = tables
        self.lock_timeout = lock_timeout
        inbox = tables.inbox
        self._where_pk = and_(
            inbox.c.consumer == bindparam("key_consumer"),
            inbox.c.command_id == bindparam("key_command_id"),
        )
        self.store_result_stmt: Executable = (
            update(inbox).where(self._where_pk).values(result=bindparam("new_result"))
        )
        self.lookup_stmt = select(inbox.c.digest, inbox.c.result, inbox.c.result_expires_at).where(
            self._where_pk
        )

    @staticmethod
    def store_result_params(consumer: str, command_id: str, result_json: str) -> dict[str, str]:
        """The parameters of :attr:`store_result_stmt` (every dialect's binds)."""
        return {"key_consumer": consumer, "key_command_id": command_id, "new_result": result_json}

    @staticmethod
    def claim_params(values: Mapping[str, Any]) -> dict[str, Any]:
        """The claim's bound parameters: the row's ``values`` and its key again
        as ``key_consumer`` and ``key_command_id`` (a bound parameter cannot
        share a column's name in an UPDATE)."""
        return {
            **values,
            "key_consumer": values["consumer"],
            "key_command_id": values["command_id"],
        }

    def claim(self, values: Mapping[str, Any]) -> ClaimSteps:
        """Insert the evidence row if absent, else return what is stored.

        ``values`` has the row's ``consumer``, ``command_id``, ``digest``,
        ``processed_at``, ``expires_at`` and ``result_expires_at``; the
        statements' own bound parameters are built from them
        (:meth:`claim_params`). A lock wait longer than ``lock_timeout``
        raises a database error that :func:`inboxguard.sql.errors.is_busy`
        recognises.

        When the row the insert conflicted with is gone before it can be read
        (deleted concurrently), the claim starts over, at most
        :data:`CLAIM_ATTEMPTS` times in all.

        Raises:
            InProgressError: the row vanished on every attempt.
        """
        params = self.claim_params(values)
        for _ in range(CLAIM_ATTEMPTS):
            found = yield from self.attempt(params)
            if found is not None:
                return found
        raise claim_vanished_error(params["consumer"], [params["command_id"]])

    @abstractmethod
    def attempt(self, params: Mapping[str, Any]) -> Steps[Claim | None]:
        """One try of :meth:`claim`: the claim, or None when the conflicting
        row vanished before it could be read."""

    @abstractmethod
    def upsert_quarantine(self) -> Executable:
        """A statement that inserts a quarantine record or, for the same
        (consumer, command_id, reason, incoming_digest), counts one more
        occurrence and reopens it."""

    @classmethod
    def for_dialect(
        cls, sa_dialect: SaDialect, tables: InboxTables, lock_timeout: dt.timedelta | None
    ) -> InboxStatements:
        """Build the statements for a connected SQLAlchemy dialect (a database
        whose statements depend on the server, such as MariaDB, overrides this)."""
        return cls(tables, lock_timeout)

    @staticmethod
    def existing(row: Any) -> Claim:
        """Build the claim of a stored row."""
        return Claim(False, row.digest, row.result, row.result_expires_at)


class _Insert(Protocol):
    """``postgresql.insert`` or ``sqlite.insert``: an insert with ``ON CONFLICT``."""

    def __call__(self, table: Table) -> Any: ...


def on_conflict_quarantine(insert: _Insert, quarantine: Table) -> Executable:
    """The quarantine upsert as ``INSERT ... ON CONFLICT DO UPDATE`` (PostgreSQL,
    SQLite): a new record, or one more occurrence of the same (consumer,
    command_id, reason, incoming_digest), reopened."""
    q = quarantine
    stmt = insert(q)
    upsert: Executable = stmt.on_conflict_do_update(
        index_elements=[q.c.consumer, q.c.command_id, q.c.reason, q.c.incoming_digest],
        set_={
            "occurrences": q.c.occurrences + 1,
            "last_seen_at": stmt.excluded.last_seen_at,
            "status": "open",
            "details": stmt.excluded.details,
        },
    )
    return upsert


class Watermark(ABC):
    """The advance of a domain watermark, for one ``<prefix>watermark`` table.

    Statements are written so that SQLAlchemy caches their compiled form (its
    dialect-specific ``insert()`` constructs are recompiled on every execution).
    """

    def __init__(self, table: Table) -> None:
        self.table = table
        self.updated_at = bindparam("updated_at", type_=UtcDateTime())

    @abstractmethod
    def advance(self, values: Mapping[str, Any]) -> Steps[bool]:
        """Raise the stored position of (``consumer``, ``key``) to ``position``.

        Returns True when it advanced (or the key is new), False when the
        stored position is at or above it. The write locks the row, so
        concurrent advances serialize and the position never goes backwards.
        """


class OnConflictWatermark(Watermark):
    """One conditional upsert (PostgreSQL, SQLite): ``ON CONFLICT DO UPDATE ...
    WHERE position < excluded.position RETURNING position``."""

    def __init__(self, table: Table) -> None:
        super().__init__(table)
        # Every value is bound; the table is rendered quoted and schema-translated.
        self._upsert = table_text(
            'INSERT INTO {watermark} AS w (consumer, "key", position, updated_at)'
            " VALUES (:consumer, :key, :position, :updated_at)"
            ' ON CONFLICT (consumer, "key") DO UPDATE'
            " SET position = excluded.position, updated_at = excluded.updated_at"
            " WHERE w.position < excluded.position"
            " RETURNING position",  # a row only when inserted or advanced
            watermark=table,
        ).bindparams(self.updated_at)

    def advance(self, values: Mapping[str, Any]) -> Steps[bool]:
        """One statement: a row comes back only when inserted or advanced."""
        return (yield self._upsert, values).first() is not None
