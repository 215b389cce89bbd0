"""DJ3: a transaction ended inside the guarded block is caught at its exit, the
way the SQL inbox catches it: a raw COMMIT, a block marked for rollback
(transaction.set_rollback, an error caught without its own atomic()) raise
ConfigurationError naming the fix; a failed nested atomic() (a savepoint)
is fine."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connections, transaction

from inboxguard import ConfigurationError


def _guard(box: Any, command_id: str) -> Any:
    return box.guard(consumer="c", command_id=command_id, payload={"n": 1})


def test_dj3_a_raw_commit_inside_the_block_is_caught(dj_inbox: Any, alias: str) -> None:
    with pytest.raises(ConfigurationError, match="committed or rolled back inside"):
        with transaction.atomic(using=alias), _guard(dj_inbox, "b-1"):
            connections[alias].connection.commit()


def test_dj3_set_rollback_inside_the_block_is_caught(dj_inbox: Any, ledger: Any) -> None:
    alias = ledger.alias
    with pytest.raises(ConfigurationError, match=r"nested transaction\.atomic\(\)"):
        with transaction.atomic(using=alias), _guard(dj_inbox, "b-2"):
            ledger.mutate("b-2")
            transaction.set_rollback(True, using=alias)
    assert ledger.applied() == []
    assert dj_inbox.lookup("c", "b-2") is None


def test_dj3_an_error_caught_without_a_savepoint_is_caught(dj_inbox: Any, ledger: Any) -> None:
    alias = ledger.alias
    with pytest.raises(ConfigurationError):
        with transaction.atomic(using=alias), _guard(dj_inbox, "b-3"):
            ledger.mutate("b-3")
            try:
                with transaction.atomic(using=alias, savepoint=False):
                    raise ValueError
            except ValueError:
                pass
    assert ledger.applied() == []
    assert dj_inbox.lookup("c", "b-3") is None


def test_dj3_a_failed_savepoint_inside_the_block_is_fine(dj_inbox: Any, ledger: Any) -> None:
    alias = ledger.alias
    with transaction.atomic(using=alias), _guard(dj_inbox, "b-4") as entry:
        try:
            with transaction.atomic(using=alias):
                ledger.mutate("discarded")
                raise ValueError
        except ValueError:
            pass
        ledger.mutate("b-4")
        entry.result = "kept"
    assert ledger.applied() == ["b-4"]
    assert dj_inbox.lookup("c", "b-4").result == "kept"
