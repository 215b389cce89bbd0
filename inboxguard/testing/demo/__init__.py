"""The inboxguard demo (``make demo``, ``inboxguard demo``): the failure stories,
played one after another against a billing handler.

Each story runs on a fresh inbox, effect ledger and fake payment provider
that share one manual clock, with deliveries carried by a broker to real
worker threads: SQLite in a temporary directory and an in-memory
at-least-once broker by default; ``--db URL`` (PostgreSQL, MariaDB) and
``--broker URL`` (Redis or RabbitMQ through kombu) play the same stories on
the real services. Per story it prints what was delivered, run, sent and
recorded, and a verdict; then the handler's guarantee table, derived by the
library as ``inboxguard guarantees`` derives it. The exit status is 1
when any story's guarantee failed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine

from inboxguard.errors import ConfigurationError
from inboxguard.testing._cases import FaultKit
from inboxguard.testing._clock import ManualClock
from inboxguard.testing._provider import FakeProvider
from inboxguard.testing.demo._app import LEASE, Billing
from inboxguard.testing.demo._broker import Workers, broker_for
from inboxguard.testing.demo._report import guarantees, table
from inboxguard.testing.demo._scenarios import SCENARIOS, Scenario

__all__ = ["add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's options (shared by ``inboxguard demo`` and ``make demo``)."""
    parser.add_argument(
        "--db", metavar="URL", help="SQLAlchemy URL (PostgreSQL, MariaDB); default: SQLite"
    )
    parser.add_argument(
        "--broker", metavar="URL", help="redis:// or amqp:// URL (kombu); default: in memory"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and play the stories; return the exit status."""
    parser = argparse.ArgumentParser(prog="inboxguard demo", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stdout, format="    log: %(levelname)s %(name)s: %(message)s")
    try:
        return run(db=args.db, broker=args.broker)
    except ConfigurationError as error:
        print(f"inboxguard demo: {error}", file=sys.stderr)
        return 2


def run(*, db: str | None = None, broker: str | None = None, out: TextIO | None = None) -> int:
    """Play every story; return 0 when every guarantee held, else 1.

    Raises:
        ConfigurationError: ``db`` or ``broker`` is unusable or unreachable
            (the message names the option and the fix).
    """
    out = out or sys.stdout
    started = time.monotonic()
    if db is not None:
        _check_db(db)
    try:
        workers = Workers(broker_for(broker))
    except Exception as error:
        msg = (
            f"--broker {broker!r}: {error}; pass a redis:// or amqp:// URL of a running broker,"
            " or leave it out for the in-memory one"
        )
        raise ConfigurationError(msg) from error
    failed = 0
    tables: list[str] = []
    with tempfile.TemporaryDirectory(prefix="inboxguard-demo-") as tmp:
        where = db.split("://", 1)[0] if db else "SQLite (temporary directory)"
        print(
            f"inboxguard demo: {len(SCENARIOS)} failure stories; {where}; {workers.broker.name}"
            " with 2 worker threads; a fake payment provider",
            file=out,
        )
        try:
            for number, scenario in enumerate(SCENARIOS, 1):
                print(f"\n[{number}/{len(SCENARIOS)}] {scenario.title} ...", file=out, flush=True)
                engine = create_engine(db) if db else _sqlite(tmp, number)
                try:
                    failed += not _play(scenario, engine, workers, out, tables)
                finally:
                    engine.dispose()
        finally:
            workers.stop()
    if tables:
        print(f"\n{tables[0]}", file=out)
    seconds = time.monotonic() - started
    if failed:
        print(f"FAILED: {failed} of {len(SCENARIOS)} stories broke a guarantee", file=out)
        return 1
    print(f"OK: every guarantee held in {len(SCENARIOS)} stories ({seconds:.1f} s)", file=out)
    return 0


def _check_db(db: str) -> None:
    try:
        engine = create_engine(db)
        with engine.connect():
            pass
        engine.dispose()
    except Exception as error:
        msg = (
            f"--db {db!r}: {type(error).__name__}: {str(error).splitlines()[0]}; pass the"
            " SQLAlchemy URL of a reachable PostgreSQL or MariaDB database"
            " (postgresql+psycopg://user@host/db), or leave it out for SQLite"
        )
        raise ConfigurationError(msg) from error


def _sqlite(tmp: str, number: int) -> Engine:
    return create_engine(f"sqlite:///{Path(tmp) / f'story{number}.db'}")


def _play(
    scenario: Scenario, engine: Engine, workers: Workers, out: TextIO, tables: list[str]
) -> bool:
    """Play one story and print its verdict; append its handler's table to ``tables``."""
    clock = ManualClock()
    provider = FakeProvider(clock=clock, lookup=scenario.lookup)
    app = Billing(engine, f"dm{uuid.uuid4().hex[:6]}_", clock, provider)
    try:
        kit = FaultKit(
            app.inbox,
            ledger=app.ledger,
            provider=provider,
            clock=clock,
            lease=LEASE,
            courier=workers.deliver,
        )
        if scenario.lookup:  # the handler as configured in production: lookup available
            tables.append(guarantees(app.inbox))
        record = scenario.play(kit, app)
        problems = scenario.check(record, app)
        verdict = "held" if not problems else "FAILED"
        print(table(record, verdict), file=out)
        print(f"    deliveries: {'; '.join(record.outcomes)}", file=out)
        for problem in problems:
            print(f"    ! {problem}", file=out)
        return not problems
    finally:
        app.drop()
