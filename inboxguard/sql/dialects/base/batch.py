"""The batch claim's statements: what every database provides for
:meth:`inboxguard.Inbox.guard_batch`.

A batch claim inserts the evidence rows of many commands of one consumer at
once and returns, per command ID, a :class:`~.inbox.Claim`: fresh (our row)
or the stored evidence. Keys are always handled in sorted order, so two
transactions claiming overlapping batches take their row locks in the same
order and never deadlock on each other's evidence rows.

Each database says how few statements it needs. The claim of a whole batch:
PostgreSQL one statement (``unnest`` arrays; a CTE inserts and reads the
stored rows), MariaDB one ``INSERT IGNORE ... RETURNING`` per 500 keys plus a
locking read of the keys it did not insert, SQLite one read then one
``INSERT ... ON CONFLICT DO NOTHING RETURNING`` per 500 keys. The results of
the fresh entries: PostgreSQL one ``UPDATE ... FROM unnest``, MariaDB and
SQLite one ``UPDATE ... CASE`` per 500 results.

MySQL (no ``INSERT ... RETURNING``) claims key by key with the single claim.
Every method is sans I/O: it yields ``(statement, parameters)`` steps and
receives their results, as :meth:`.inbox.InboxStatements.claim` does.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from sqlalchemy import Executable, bindparam, delete, select
from sqlalchemy.engine import Dialect as SaDialect

from inboxguard.sql.dialects.base.inbox import Claim, InboxStatements, Step, Steps
from inboxguard.sql.table_text import table_text
from inboxguard.sql.tables import InboxTables
from inboxguard.sql.types import UtcDateTime, long_text

__all__ = ["CHUNK", "BatchStatements", "CaseResultStore", "ValuesInsert", "chunks"]

#: Most keys one statement carries where each key is its own bound parameters
#: (MariaDB, SQLite): 500 keys stay far below every database's parameter limit.
CHUNK = 500


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class BatchStatements(ABC):
    """The batch claim and result store of one database, for one table prefix.

    ``rows`` passed to :meth:`claim` are the claim parameters of one
    command each (``command_id``, ``digest``), sorted by command ID, with the
    batch's shared ``consumer``, ``processed_at``, ``expires_at`` and
    ``result_expires_at`` given once in ``shared``.
    """

    #: Read the stored rows before inserting (SQLite: the caller's
    #: connection then holds no write lock while refusals are quarantined).
    reads_first: ClassVar[bool] = False

    def __init__(self, tables: InboxTables, lock_timeout: dt.timedelta | None) -> None:
        self.tables = tables
        self.lock_timeout = lock_timeout
        c = tables.inbox.c
        self._release = delete(tables.inbox).where(
            c.consumer == bindparam("consumer"),
            c.command_id.in_(bindparam("ids", expanding=True)),
        )
        self._read = select(c.command_id, c.digest, c.result, c.result_expires_at).where(
            c.consumer == bindparam("consumer"),
            c.command_id.in_(bindparam("ids", expanding=True)),
        )

    @classmethod
    def for_dialect(
        cls, sa_dialect: SaDialect, tables: InboxTables, lock_timeout: dt.timedelta | None
    ) -> BatchStatements:
        """Build the statements for a connected SQLAlchemy dialect."""
        return cls(tables, lock_timeout)

    @abstractmethod
    def claim(
        self, shared: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
    ) -> Steps[dict[str, Claim]]:
        """Insert the rows that are absent and return a claim per key: fresh
        for the rows inserted, the stored evidence for those found. A key
        missing from the answer conflicted with a row this statement could
        not see (committed after its snapshot, or deleted since): the caller
        reads it again (:meth:`read`) and, if it is gone, claims it again.
        A lock wait longer than ``lock_timeout`` raises a database error that
        :func:`inboxguard.sql.errors.is_busy` recognises."""

    def read(self, consumer: str, keys: Sequence[str]) -> Steps[dict[str, Claim]]:
        """The stored evidence of ``keys`` (those that have a row)."""
        found: dict[str, Claim] = {}
        for part in chunks(keys):
            result = yield self.read_step(consumer, part)
            found.update((row.command_id, InboxStatements.existing(row)) for row in result)
        return found

    def read_step(self, consumer: str, keys: Sequence[str]) -> Step:
        """One statement reading the stored rows of ``keys``."""
        return self._read, {"consumer": consumer, "ids": list(keys)}

    def release(self, consumer: str, keys: Sequence[str]) -> list[Step]:
        """Statements deleting the claims of ``keys`` (given back by the
        caller); their row counts add up to ``len(keys)``."""
        return [(self._release, {"consumer": consumer, "ids": list(p)}) for p in chunks(keys)]

    @abstractmethod
    def store_results(self, consumer: str, results: Sequence[tuple[str, str]]) -> list[Step]:
        """Statements storing each ``(command_id, result_json)`` on its row;
        their row counts add up to ``len(results)`` when every row is there."""


class CaseResultStore:
    """``UPDATE ... SET result = CASE command_id WHEN ... END WHERE ... IN
    (...)``: every result of a chunk in one statement (MariaDB, SQLite), the
    statement text cached per chunk size."""

    def __init__(self, tables: InboxTables) -> None:
        self._inbox = tables.inbox
        self._by_size: dict[int, Executable] = {}

    def steps(self, consumer: str, results: Sequence[tuple[str, str]]) -> list[Step]:
        """One step per chunk of at most :data:`CHUNK` results."""
        out: list[Step] = []
        for part in chunks(results):
            params: dict[str, Any] = {"consumer": consumer}
            for i, (command_id, result) in enumerate(part):
                params[f"k{i}"] = command_id
                params[f"r{i}"] = result
            out.append((self._statement(len(part)), params))
        return out

    def _statement(self, n: int) -> Executable:
        found = self._by_size.get(n)
        if found is None:
            whens = " ".join(f"WHEN :k{i} THEN :r{i}" for i in range(n))
            keys = ", ".join(f":k{i}" for i in range(n))
            found = table_text(
                f"UPDATE {{inbox}} SET result = CASE command_id {whens} END"
                f" WHERE consumer = :consumer AND command_id IN ({keys})",
                inbox=self._inbox,
            ).bindparams(*(bindparam(f"r{i}", type_=long_text()) for i in range(n)))
            if len(self._by_size) < 64:  # the usual batch sizes; others are built each time
                self._by_size[n] = found
        return found


class ValuesInsert:
    """A multi-row ``INSERT ... VALUES (...), (...)`` of evidence rows, one
    per key ``:k<i>`` with digest ``:d<i>`` and the batch's shared values,
    wrapped as ``{head}INSERT ... VALUES ...{tail}``; cached per chunk size."""

    def __init__(self, tables: InboxTables, *, head: str, verb: str, tail: str) -> None:
        self._inbox = tables.inbox
        self._head = head
        self._verb = verb
        self._tail = tail
        self._by_size: dict[int, Executable] = {}

    def step(self, shared: Mapping[str, Any], part: Sequence[Mapping[str, Any]]) -> Step:
        """The insert of one chunk of rows, with its parameters."""
        params: dict[str, Any] = dict(shared)
        for i, row in enumerate(part):
            params[f"k{i}"] = row["command_id"]
            params[f"d{i}"] = row["digest"]
        return self._statement(len(part)), params

    def _statement(self, n: int) -> Executable:
        found = self._by_size.get(n)
        if found is None:
            values = ", ".join(
                f"(:consumer, :k{i}, :d{i}, :processed_at, :expires_at, :result_expires_at)"
                for i in range(n)
            )
            found = table_text(
                f"{self._head}{self._verb} INTO {{inbox}}"
                " (consumer, command_id, digest, processed_at, expires_at, result_expires_at)"
                f" VALUES {values}{self._tail}",
                inbox=self._inbox,
            ).bindparams(
                bindparam("processed_at", type_=UtcDateTime()),
                bindparam("expires_at", type_=UtcDateTime()),
                bindparam("result_expires_at", type_=UtcDateTime()),
            )
            if len(self._by_size) < 64:  # the usual batch sizes; others are built each time
                self._by_size[n] = found
        return found
