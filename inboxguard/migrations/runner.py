"""Run inboxguard's Alembic revisions without an Alembic environment of one's own.

:func:`upgrade` and :func:`current` build the environment in memory: the
shipped revisions (:data:`~inboxguard.migrations.VERSION_LOCATION`), the
table prefix, and a version table of their own (``<prefix>alembic_version``
by default), so they never meet a project's own Alembic history. Pass
``version_table="alembic_version"`` to share the project's table instead
(the project's own revisions must then be reachable, as in its own env).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Engine

from inboxguard.migrations import BRANCH, VERSION_LOCATION
from inboxguard.sql.tables import check_prefix

__all__ = [
    "BRANCHES",
    "RevisionState",
    "current",
    "first_tables",
    "stamp",
    "upgrade",
    "version_table_for",
]

#: The revision branches, by the part of inboxguard whose tables they create.
BRANCHES: dict[str, str] = {
    "inbox": BRANCH,
    "outbox": "inboxguard_outbox",
    "effects": "inboxguard_effects",
}


@dataclass(frozen=True, slots=True)
class RevisionState:
    """Where one branch stands: ``current`` revision (None: never upgraded
    through this version table) and ``head``, the newest shipped one."""

    part: str
    branch: str
    current: str | None
    head: str

    @property
    def up_to_date(self) -> bool:
        """Whether the database is at the newest shipped revision."""
        return self.current == self.head


def version_table_for(table_prefix: str) -> str:
    """The default version table of ``table_prefix``: ``<prefix>alembic_version``."""
    return f"{check_prefix(table_prefix)}alembic_version"


def upgrade(
    engine: Engine,
    *,
    table_prefix: str = "inboxguard_",
    parts: Iterable[str] = tuple(BRANCHES),
    version_table: str | None = None,
) -> list[RevisionState]:
    """Upgrade each of ``parts`` (``inbox``, ``outbox``, ``effects``) to its
    newest revision, in one transaction per database where DDL is
    transactional; return where each branch stands afterwards.

    Raises:
        ConfigurationError: a part is unknown or the prefix is unusable.
    """
    wanted = _parts(parts)
    table = version_table or version_table_for(table_prefix)
    targets = [f"{BRANCHES[p]}@head" for p in wanted]

    def run(rev: Any, context: Any) -> Any:
        # What ``alembic upgrade`` itself runs, with several branch heads at once.
        return context.script._upgrade_revs(targets, rev)  # noqa: SLF001

    with engine.begin() as conn:
        _run(conn, table_prefix, table, run)
    return current(engine, table_prefix=table_prefix, parts=wanted, version_table=table)


def stamp(
    engine: Engine,
    *revisions: str,
    table_prefix: str = "inboxguard_",
    version_table: str | None = None,
) -> list[RevisionState]:
    """Record ``revisions`` (e.g. ``ig0004``) as applied without running
    them: for tables ``create_schema()`` made, so later upgrades start there.

    Raises:
        ConfigurationError: the prefix is unusable.
        alembic.util.CommandError: a revision is not one of the shipped ones.
    """
    table = version_table or version_table_for(table_prefix)

    def run(rev: Any, context: Any) -> Any:
        return context.script._stamp_revs(revisions, rev)  # noqa: SLF001 - as `alembic stamp`

    with engine.begin() as conn:
        _run(conn, table_prefix, table, run)
    return current(engine, table_prefix=table_prefix, version_table=table)


def first_tables(table_prefix: str) -> dict[str, str]:
    """The table each part's first revision creates, by part: present without
    a recorded revision, it was made by ``create_schema()``."""
    p = check_prefix(table_prefix)
    return {"inbox": f"{p}inbox", "outbox": f"{p}outbox", "effects": f"{p}effects"}


def current(
    engine: Engine,
    *,
    table_prefix: str = "inboxguard_",
    parts: Iterable[str] = tuple(BRANCHES),
    version_table: str | None = None,
) -> list[RevisionState]:
    """Where each of ``parts`` stands; reads only (no version table is created).

    Raises:
        ConfigurationError: a part is unknown or the prefix is unusable.
    """
    wanted = _parts(parts)
    table = version_table or version_table_for(table_prefix)
    script = _script()
    with engine.connect() as conn:
        stored = _stored(conn, table)
    found = []
    for part in wanted:
        branch = BRANCHES[part]
        head = script.get_revision(f"{branch}@head")
        members = {r.revision for r in script.iterate_revisions(f"{branch}@head", "base")}
        here = next((r for r in stored if r in members), None)
        found.append(RevisionState(part, branch, here, head.revision if head else ""))
    return found


def _script() -> Any:
    from alembic.script import ScriptDirectory  # noqa: PLC0415 - alembic is an extra

    here = str(Path(VERSION_LOCATION).parent)
    return ScriptDirectory(here, version_locations=[VERSION_LOCATION])


def _stored(conn: Connection, table: str) -> list[str]:
    if not inspect(conn).has_table(table):
        return []
    from alembic.runtime.migration import MigrationContext  # noqa: PLC0415

    context = MigrationContext.configure(conn, opts={"version_table": table})
    return list(context.get_current_heads())


def _run(conn: Connection, table_prefix: str, table: str, fn: Any) -> None:
    from alembic.config import Config  # noqa: PLC0415 - alembic is an extra
    from alembic.runtime.environment import EnvironmentContext  # noqa: PLC0415

    config = Config()
    config.set_main_option("inboxguard_table_prefix", check_prefix(table_prefix))
    with EnvironmentContext(config, _script(), fn=fn) as env:
        env.configure(connection=conn, version_table=table)
        with env.begin_transaction():
            env.run_migrations()


def _parts(parts: Iterable[str]) -> list[str]:
    from inboxguard.errors import ConfigurationError  # noqa: PLC0415

    wanted = list(dict.fromkeys(parts))
    unknown = [p for p in wanted if p not in BRANCHES]
    if unknown or not wanted:
        names = ", ".join(BRANCHES)
        msg = f"unknown part(s) {', '.join(unknown) or '(none given)'}; choose from {names}"
        raise ConfigurationError(msg)
    return wanted
