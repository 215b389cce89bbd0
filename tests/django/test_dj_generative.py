"""G24 through the Django store: the generated handler programs of
``tests/guarantees/test_g24_generative.py`` run in a guarded block on
Django's connection (SQLite, PostgreSQL, MariaDB), with the same invariant
after each program, its redelivery and a mismatched delivery."""

from __future__ import annotations

import contextlib
from typing import Any

from django.db import DatabaseError, connections, transaction
from hypothesis import given

from inboxguard import ConfigurationError, PayloadMismatchError
from tests.conftest import unique
from tests.guarantees.test_g24_generative import (
    SETTINGS,
    CatchInside,
    Commit,
    Ended,
    HandlerError,
    Nested,
    Program,
    Savepoint,
    Write,
    kept_writes,
    programs,
)

_counter = iter(range(1, 10**9))


class _RollbackError(Exception):
    """Leaves a nested atomic() so that Django rolls its savepoint back."""


def _run(box: Any, ledger: Any, cid: str, steps: tuple[Any, ...]) -> None:
    alias = ledger.alias
    for step in steps:
        match step:
            case Write():
                ledger.mutate(cid, next(_counter))
            case CatchInside():
                with contextlib.suppress(DatabaseError), connections[alias].cursor() as c:
                    c.execute("SELECT * FROM no_such_table_ig")
            case Savepoint(body, rollback):
                with contextlib.suppress(_RollbackError), transaction.atomic(using=alias):
                    _run(box, ledger, cid, body)
                    if rollback:
                        raise _RollbackError
            case Commit(_, catch):
                try:
                    with connections[alias].cursor() as c:
                        c.execute("COMMIT")
                except ConfigurationError:
                    if not catch:
                        raise
            case Ended():
                connections[alias].connection.rollback()
            case Nested():
                inner = f"{cid}-nested"
                with box.guard(consumer="g", command_id=inner, payload={}) as e:
                    if not e.duplicate:
                        ledger.mutate(inner)
            case _:  # Raise, Cancel
                raise HandlerError


def _count(ledger: Any, cid: str) -> int:
    return ledger.applied().count(cid)


@SETTINGS
@given(program=programs)
def test_g24_generated_programs_django(dj_inbox: Any, ledger: Any, program: Program) -> None:
    """Every generated program keeps the invariant on Django's connection."""
    box, alias, cid = dj_inbox, ledger.alias, unique("p")
    ended = False
    with contextlib.suppress(Exception), transaction.atomic(using=alias):
        try:
            with box.guard(consumer="g", command_id=cid, payload={"v": 1}):
                _run(box, ledger, cid, program.steps)
            ended = True
        except Exception:
            if not program.catch_outside:
                raise
    evidence = box.lookup("g", cid) is not None
    applied = _count(ledger, cid)
    if evidence:
        assert ended, (program, "evidence of a block that failed")
        assert applied == kept_writes(program.steps), (program, applied)
    else:
        assert applied == 0, (program, applied)
    with (
        transaction.atomic(using=alias),
        box.guard(consumer="g", command_id=cid, payload={"v": 1}) as e,
    ):
        if not e.duplicate:
            ledger.mutate(cid)
    assert _count(ledger, cid) == (applied if evidence else 1), program
    with contextlib.suppress(PayloadMismatchError), transaction.atomic(using=alias):
        with box.guard(consumer="g", command_id=cid, payload={"v": 2}):
            raise AssertionError(program)  # pragma: no cover - refused before the block
    nested = f"{cid}-nested"
    assert _count(ledger, nested) == (1 if box.lookup("g", nested) is not None else 0)
