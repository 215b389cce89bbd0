"""The one order the ledger cannot run in: inside an inbox guard on the same
SQLite database.

SQLite has one writer at a time. A guard's claim makes its transaction the
writer until it commits, so a ledger step on the same database file would
wait for a lock only its own caller can release: five seconds of busy
timeout per attempt, then ``database is locked``, which a consumer would
retry for ever. The guard in this context is known (it binds its session to
:func:`inboxguard.current_session`), so the ledger refuses at once instead.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from inboxguard._core.context import session_var
from inboxguard.errors import ConfigurationError
from inboxguard.sql.dialects.sqlite.database import same_database

__all__ = ["refuse_inside_sqlite_guard"]


def refuse_inside_sqlite_guard(engine: Engine, effect_key: str) -> None:
    """Raise ConfigurationError when a guard running in this context holds
    the write lock of the SQLite database ``engine`` writes to."""
    guard_engine = _engine_of(session_var.get(None))
    if guard_engine is None or not same_database(guard_engine, engine):
        return
    msg = (
        f"effect {effect_key!r}: the effect ledger cannot write to this SQLite database"
        " while the inbox guard running here holds its write lock (SQLite has one writer"
        " at a time, so the ledger would wait for a lock only the guard's commit"
        " releases); on SQLite call ledger.execute(...) first and open the guarded"
        " transaction afterwards (a duplicate then gets the stored receipt without a"
        " provider call), or keep the ledger's tables in another database"
    )
    raise ConfigurationError(msg)


def _engine_of(session: object) -> Engine | None:
    bind: object = None
    if isinstance(session, Session):
        bind = session.get_bind()
    elif isinstance(session, Connection):
        bind = session.engine
    if isinstance(bind, Connection):
        bind = bind.engine
    return bind if isinstance(bind, Engine) else None
