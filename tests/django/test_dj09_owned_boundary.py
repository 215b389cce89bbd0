"""DJ9-DJ12: the Django store's guard owns its part of the caller's atomic() block.

DJ9: an error leaving the guarded block, caught by the caller inside its own
``atomic()`` which then commits, leaves no claim and nothing of the block.
DJ10: a raw ``COMMIT`` (or, on MariaDB, an implicitly committing statement)
through Django's cursor is refused before it runs, even when the handler
catches the refusal and carries on. DJ11: a write through another database
alias inside the block is refused, naming the fix. DJ12: a transaction ended
behind Django's back (the driver connection's own rollback, then a write)
is caught at the exit by the database's word, and nothing of the block
commits.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from django.db import connections, transaction

from inboxguard import ConfigurationError
from tests.django.support import add_sqlite_alias


def _guard(box: Any, command_id: str) -> Any:
    return box.guard(consumer="c", command_id=command_id, payload={"n": 1})


def _redeliver(box: Any, ledger: Any, command_id: str) -> bool:
    with transaction.atomic(using=ledger.alias), _guard(box, command_id) as entry:
        if entry.duplicate:
            return False
        ledger.mutate(command_id)
    return True


def test_dj9_error_caught_inside_the_callers_block_leaves_nothing(
    dj_inbox: Any, ledger: Any
) -> None:
    alias = ledger.alias
    with transaction.atomic(using=alias):
        ledger.mutate("caller's own")
        with contextlib.suppress(RuntimeError):
            with _guard(dj_inbox, "dj9"):
                ledger.mutate("dj9")
                raise RuntimeError("handler failed")
    assert ledger.applied() == ["caller's own"]
    assert dj_inbox.lookup("c", "dj9") is None
    assert _redeliver(dj_inbox, ledger, "dj9")
    assert not _redeliver(dj_inbox, ledger, "dj9")
    assert ledger.applied() == ["caller's own", "dj9"]


@pytest.mark.parametrize("statement", ["COMMIT", "CREATE TABLE ig_dj_implicit (x INT)"])
def test_dj10_a_commit_through_the_cursor_is_refused_before_it_runs(
    dj_inbox: Any, ledger: Any, statement: str
) -> None:
    alias = ledger.alias
    vendor = connections[alias].vendor
    if statement.startswith("CREATE") and vendor != "mysql":
        pytest.skip(f"DDL is transactional on {vendor}")
    with pytest.raises(ConfigurationError, match="inside the guarded block"):
        with transaction.atomic(using=alias), _guard(dj_inbox, "dj10"):
            ledger.mutate("dj10")
            with (
                pytest.raises(ConfigurationError, match="refused"),
                connections[alias].cursor() as c,
            ):
                c.execute(statement)
            ledger.mutate("dj10", 2)
    assert ledger.applied() == []
    assert dj_inbox.lookup("c", "dj10") is None
    assert _redeliver(dj_inbox, ledger, "dj10")
    assert ledger.applied() == ["dj10"]


def test_dj11_a_write_through_another_alias_is_refused(
    dj_inbox: Any, ledger: Any, tmp_path: Any
) -> None:
    other = add_sqlite_alias("dj11_other", str(tmp_path / "other.db"))
    with connections[other].cursor() as cursor:
        cursor.execute("CREATE TABLE paid (command_id VARCHAR(64))")
    alias = ledger.alias
    with pytest.raises(ConfigurationError):
        with transaction.atomic(using=alias), _guard(dj_inbox, "dj11"):
            ledger.mutate("dj11")
            with pytest.raises(ConfigurationError, match="put the inbox tables on the handler"):
                with connections[other].cursor() as cursor:
                    cursor.execute("INSERT INTO paid VALUES ('dj11')")
            with connections[other].cursor() as cursor:  # reads stay allowed
                cursor.execute("SELECT COUNT(*) FROM paid")
    with connections[other].cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM paid")
        assert cursor.fetchone()[0] == 0
    assert ledger.applied() == []
    assert dj_inbox.lookup("c", "dj11") is None
    connections[other].close()


def test_dj12_a_transaction_ended_behind_django_is_caught_at_the_exit(
    dj_inbox: Any, ledger: Any
) -> None:
    alias = ledger.alias
    with pytest.raises(ConfigurationError):
        with transaction.atomic(using=alias), _guard(dj_inbox, "dj12"):
            connections[alias].connection.rollback()  # the claim is gone; Django never knew
            ledger.mutate("dj12")
    assert ledger.applied() == []
    assert dj_inbox.lookup("c", "dj12") is None
    assert _redeliver(dj_inbox, ledger, "dj12")
    assert ledger.applied() == ["dj12"]
