"""The persistence interface: what a dialect must do for the inbox.

A dialect turns the inbox's operations into statements for one database. The
claim is written *sans I/O*: :meth:`Dialect.claim` is a generator that yields
``(statement, parameters)`` pairs and receives each statement's result, so the
same decision logic drives a sync :class:`~sqlalchemy.engine.Connection` and an
:class:`~sqlalchemy.ext.asyncio.AsyncConnection` without being written twice.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import Executable, and_, bindparam, select, update
from sqlalchemy.engine import Result

from inboxguard.sql.schema import InboxTables

__all__ = ["Claim", "ClaimSteps", "Dialect", "Step"]

#: One statement to run, with its parameters.
Step = tuple[Executable, Mapping[str, Any]]
#: The claim protocol: yields steps, receives their results, returns a Claim.
ClaimSteps = Generator[Step, Result[Any], "Claim"]


@dataclass(frozen=True, slots=True)
class Claim:
    """What the claim found: a fresh row of ours, or the stored evidence."""

    fresh: bool
    stored_digest: str
    result_json: str | None = None
    result_expires_at: dt.datetime | None = None


class Dialect(ABC):
    """Statements and capabilities of one database, built once per table prefix.

    Capability flags are class attributes that drive code paths, tests and the
    capability table in ``docs/dialects.md``.
    """

    #: SQLAlchemy dialect names this class serves.
    names: ClassVar[tuple[str, ...]]
    #: ``FOR UPDATE SKIP LOCKED`` is available for batch claims.
    supports_skip_locked: ClassVar[bool] = False
    #: A duplicate of a long-committed command is verified in one round trip.
    duplicate_in_one_round_trip: ClassVar[bool] = False
    #: Several processes may claim concurrently (row-level locking).
    concurrent_writers: ClassVar[bool] = True

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

    @abstractmethod
    def claim(self, params: Mapping[str, Any]) -> ClaimSteps:
        """Insert the evidence row if absent, else return what is stored.

        ``params`` has ``consumer``, ``command_id``, ``digest``,
        ``processed_at``, ``expires_at`` and ``result_expires_at``, and the
        row's key again as ``key_consumer`` and ``key_command_id`` (a bound
        parameter cannot share a column's name in an UPDATE). A lock
        wait longer than ``lock_timeout`` raises a database error that
        :func:`inboxguard.sql.errors.is_busy` recognises.
        """

    @abstractmethod
    def upsert_quarantine(self) -> Executable:
        """A statement that inserts a quarantine record or, for the same
        (consumer, command_id, reason, incoming_digest), counts one more
        occurrence and reopens it."""

    @staticmethod
    def existing(row: Any) -> Claim:
        """Build the claim of a stored row."""
        return Claim(False, row.digest, row.result, row.result_expires_at)
