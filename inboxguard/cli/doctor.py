"""``inboxguard doctor --app MODULE:ATTR``: the worker's start-up checks, run
before a deploy.

    inboxguard doctor --app proj.worker:app [--json]

For the Celery app, Dramatiq broker or Inbox named by ``--app`` (resolved
from the current directory like ``celery -A``): the extras the deployment
needs are installed; each database is reachable, its connection character
set and isolation level keep the guarantees (READ COMMITTED for a
partitioned inbox); every table exists (the audit trails included); a
partitioned inbox has partitions up to the expiry of a claim made now and
nothing waiting in its DEFAULT partition; the Alembic revisions are current
where inboxguard's revisions manage the tables; every replay window the
workers discover fits inside its inbox's evidence horizon; on RabbitMQ,
each queue a guarded Celery task is routed to declares a dead-letter exchange
whose dead-letter queue exists (checked passively); and the framework's own
start-up check passes. Exit status: 0 every check passed
(warnings allowed), 1 a check failed, 2 ``--app`` cannot be loaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import warnings
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, inspect, select

from inboxguard import InboxGuardError, InboxStore
from inboxguard.cli._app import resolve_object
from inboxguard.cli._args import add_json
from inboxguard.cli._db import missing_sqlite_file, redact
from inboxguard.cli._output import EXIT_FOUND, EXIT_OK, EXIT_USAGE, emit_json, table
from inboxguard.cli._windows import DEFAULT_APP_ATTRS, Discovery, discover
from inboxguard.inbox import SqlInboxStore, is_sql_store
from inboxguard.sql.dialects import database_for
from inboxguard.sql.dialects.postgresql.partitioned import claims_at
from inboxguard.sql.dialects.postgresql.partitions import PartitionLayout

__all__ = ["Check", "register", "run_checks"]

_FRAMEWORK_EXTRA = {"celery": "celery", "dramatiq": "dramatiq"}


@dataclass(frozen=True, slots=True)
class Check:
    """One finding: ``status`` is ``ok``, ``warn`` or ``fail``."""

    check: str
    status: str
    detail: str


def register(subparsers: Any) -> None:
    """Add ``doctor``."""
    parser = subparsers.add_parser(
        "doctor",
        help="run a worker's start-up checks before a deploy",
        description="Check an application before a deploy: extras installed, databases"
        " reachable with a sane charset and isolation, tables present, Alembic revisions"
        " current, every discovered replay window inside the evidence horizon, and the"
        " framework's own start-up check. Exit 1 when a check fails.",
    )
    parser.add_argument(
        "--app",
        required=True,
        metavar="MODULE:ATTR",
        help="your Celery app, Dramatiq broker or Inbox (e.g. proj.worker:app, or"
        " proj.worker:build() for a factory), resolved from the current directory like"
        " celery -A",
    )
    add_json(parser)
    parser.set_defaults(func=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    try:
        found = discover(resolve_object(args.app, default_attrs=DEFAULT_APP_ATTRS), args.app)
    except InboxGuardError as error:
        print(f"inboxguard doctor: {error}", file=sys.stderr)
        return EXIT_USAGE
    checks = list(run_checks(found))
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        emit_json(
            {"app": args.app, "framework": found.framework, "ok": not failed, "checks": checks}
        )
    else:
        table(("STATUS", "CHECK", "DETAIL"), [(c.status, c.check, c.detail) for c in checks])
        print(f"\n{'FAILED' if failed else 'ok'}: {args.app} ({found.framework})")
    return EXIT_FOUND if failed else EXIT_OK


def run_checks(found: Discovery) -> Iterator[Check]:
    """Every check, in the order a worker meets them."""
    yield from _extras(found)
    every_reachable = True
    for inbox in found.inboxes:
        if not is_sql_store(inbox):
            reachable = yield from _store(inbox)
            every_reachable = every_reachable and reachable
            continue
        reachable = yield from _connection(inbox)
        every_reachable = every_reachable and reachable
        if reachable:
            present = yield from _tables(inbox)
            if present:
                yield from _partitions(inbox)
            yield from _revisions(inbox)
    yield from _windows(found)
    for status, detail in found.dead_letters():
        yield Check("dead-letter", status, detail)
    if every_reachable:
        yield _startup(found)
    else:
        yield Check("startup", "fail", "not run: a database above cannot be used")


def _extras(found: Discovery) -> Iterator[Check]:
    extra = _FRAMEWORK_EXTRA.get(found.framework)
    if extra is not None:
        yield Check("extras", "ok", f"{found.framework} installed (inboxguard[{extra}])")
    for inbox in found.sql_inboxes:
        driver = inbox.engine.dialect.driver
        yield Check("extras", "ok", f"driver {driver} for {redact(inbox.engine.url)}")
    if importlib.util.find_spec("alembic") is None:
        yield Check(
            "extras", "warn", "alembic missing: revisions unchecked (inboxguard[migrations])"
        )


def _store(inbox: InboxStore) -> Generator[Check, None, bool]:
    """A store outside SQL tables (a Redis inbox): its own ``check_schema()``,
    each warning it gives (a server that keeps nothing on disk) a warning here."""
    where = f"{inbox.capabilities.store} inbox"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            inbox.check_schema()
        except InboxGuardError as error:
            yield Check(inbox.capabilities.store, "fail", f"{where}: {error}")
            return True
        except Exception as error:  # unreachable, refused
            yield Check(
                inbox.capabilities.store, "fail", f"{where}: cannot connect: {_first_line(error)}"
            )
            return False
    problems = [str(w.message) for w in seen if issubclass(w.category, UserWarning)]
    for problem in problems:
        yield Check(inbox.capabilities.store, "warn", f"{where}: {problem}")
    if not problems:
        boundary, _ = inbox.transaction_boundary()
        yield Check(inbox.capabilities.store, "ok", f"{where}: checks passed; {boundary}")
    return True


def _connection(inbox: SqlInboxStore) -> Generator[Check, None, bool]:
    where = redact(inbox.engine.url)
    missing = missing_sqlite_file(inbox.engine.url)
    if missing is not None:  # connecting would create an empty database there
        yield Check("connection", "fail", f"{where}: no SQLite database at {missing}")
        return False
    try:
        with inbox.engine.connect() as conn:
            database_for(conn.dialect)  # refuses a charset that breaks exact IDs
            level = str(conn.get_isolation_level())
    except InboxGuardError as error:
        yield Check("connection", "fail", f"{where}: {error}")
        return False
    except Exception as error:  # unreachable, refused, wrong credentials
        yield Check("connection", "fail", f"{where}: cannot connect: {_first_line(error)}")
        return False
    if level.upper() == "AUTOCOMMIT":
        detail = (
            f"{where}: isolation AUTOCOMMIT commits every statement; the guard needs a transaction"
        )
        yield Check("connection", "fail", detail)
        return True
    if inbox.partitioning is not None and not claims_at(level):
        detail = (
            f"{where}: isolation {level}: a partitioned inbox claims only under READ COMMITTED,"
            " so every guarded transaction would be refused: create_engine(...,"
            " isolation_level='READ COMMITTED')"
        )
        yield Check("connection", "fail", detail)
        return True
    yield Check("connection", "ok", f"{where}: reachable, isolation {level}")
    return True


def _tables(inbox: SqlInboxStore) -> Generator[Check, None, bool]:
    try:
        inbox.check_schema()
    except InboxGuardError as error:
        yield Check("tables", "fail", str(error))
        return False
    present = set(inspect(inbox.engine).get_table_names())
    audit = [inbox.tables.quarantine_replays.name, inbox.tables.quarantine_actions.name]
    missing = [name for name in audit if name not in present]
    if missing:
        detail = f"missing {', '.join(missing)}: run inboxguard db upgrade (or create_schema())"
        yield Check("tables", "fail", detail)
        return False
    yield Check("tables", "ok", f"inbox tables present (prefix {inbox.table_prefix})")
    return True


def _partitions(inbox: SqlInboxStore) -> Iterator[Check]:
    """A partitioned inbox: partitions up to the expiry of a claim made now,
    and an empty DEFAULT partition (rows there mean maintenance fell behind)."""
    if inbox.partitioning is None:
        return
    layout = PartitionLayout(inbox.tables, inbox.partitioning)
    needed = layout.horizon_end(inbox.clock(), inbox.retention.horizon, 0)  # naive UTC
    with inbox.engine.connect() as conn:
        found = list(layout.partitions(conn).values())
        caught = int(conn.execute(select(func.count()).select_from(layout.default)).scalar_one())
    fix = "run inbox.create_partitions() or inboxguard purge --partitioning ... --horizon ..."
    span = f"{len(found)} {inbox.partitioning} partitions"
    if found:
        span += f", {found[0]:%Y-%m-%d} to {found[-1]:%Y-%m-%d}"
    behind = not found or found[-1] < needed
    if behind:
        detail = f"{span}: none for {needed:%Y-%m-%d}, the expiry of a claim made now: {fix}"
        yield Check("partitions", "warn", detail)
    if caught:
        detail = f"DEFAULT partition holds {caught} row(s): maintenance fell behind: {fix}"
        yield Check("partitions", "warn", detail)
    if not behind and not caught:
        yield Check("partitions", "ok", f"{span}; DEFAULT partition empty")


def _revisions(inbox: SqlInboxStore) -> Iterator[Check]:
    if importlib.util.find_spec("alembic") is None:
        return
    from inboxguard.migrations import runner  # noqa: PLC0415 - alembic is an extra

    for version_table in (runner.version_table_for(inbox.table_prefix), "alembic_version"):
        [state] = runner.current(
            inbox.engine,
            table_prefix=inbox.table_prefix,
            parts=["inbox"],
            version_table=version_table,
        )
        if state.current is None:
            continue
        if state.up_to_date:
            yield Check("revisions", "ok", f"inbox at {state.head} ({version_table})")
        else:
            detail = f"inbox at {state.current}, newest {state.head}: run inboxguard db upgrade"
            yield Check("revisions", "fail", f"{detail} ({version_table})")
        return
    yield Check("revisions", "ok", "no Alembic revision recorded: tables from create_schema()")


def _windows(found: Discovery) -> Iterator[Check]:
    for item in found.found:
        horizon = item.inbox.retention.horizon
        for window in item.windows:
            if window.bound > horizon:
                detail = (
                    f"{item.handler}: {window.name}={_fmt(window.bound)} ({window.source})"
                    f" outlives the evidence horizon {_fmt(horizon)}"
                )
                yield Check("retention", "fail", detail)
        fitting = [w for w in item.windows if w.bound <= horizon]
        if fitting and len(fitting) == len(item.windows):
            names = ", ".join(f"{w.name}={_fmt(w.bound)}" for w in fitting)
            yield Check("retention", "ok", f"{item.handler}: {names} inside {_fmt(horizon)}")
        elif not item.windows:
            yield Check("retention", "ok", f"{item.handler}: no replay window discovered")


def _startup(found: Discovery) -> Check:
    try:
        found.startup_check()
    except InboxGuardError as error:
        return Check("startup", "fail", str(error))
    return Check("startup", "ok", f"the {found.framework} start-up check passes")


def _fmt(length: Any) -> str:
    from inboxguard._core.retention import format_duration  # noqa: PLC0415

    return format_duration(length)


def _first_line(error: Exception) -> str:
    orig = getattr(error, "orig", None) or error
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__
