"""DJ1: the guard claims on the connection of the caller's atomic() block: the
evidence commits if and only if the block's changes commit, on SQLite,
PostgreSQL and MariaDB; values travel as bound parameters."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction


class BoomError(Exception):
    pass


def _deliver(box: Any, ledger: Any, command_id: str, payload: Any, *, fail: bool = False) -> Any:
    with transaction.atomic(using=ledger.alias):
        with box.guard(consumer="billing", command_id=command_id, payload=payload) as entry:
            if not entry.duplicate:
                ledger.mutate(command_id)
                entry.result = {"charged": command_id}
                if fail:
                    raise BoomError
            return entry


def test_dj1_claim_and_change_commit_together(dj_inbox: Any, ledger: Any) -> None:
    entry = _deliver(dj_inbox, ledger, "c-1", {"amount": 5})
    assert not entry.duplicate
    assert ledger.applied() == ["c-1"]
    assert dj_inbox.lookup("billing", "c-1").result == {"charged": "c-1"}
    again = _deliver(dj_inbox, ledger, "c-1", {"amount": 5})
    assert again.duplicate
    assert again.result == {"charged": "c-1"}
    assert ledger.applied() == ["c-1"]


def test_dj1_a_failed_block_leaves_neither_and_the_redelivery_applies(
    dj_inbox: Any, ledger: Any
) -> None:
    with pytest.raises(BoomError):
        _deliver(dj_inbox, ledger, "c-2", {"amount": 5}, fail=True)
    assert ledger.applied() == []
    assert dj_inbox.lookup("billing", "c-2") is None
    assert not _deliver(dj_inbox, ledger, "c-2", {"amount": 5}).duplicate
    assert ledger.applied() == ["c-2"]


def test_dj1_an_outer_rollback_takes_the_claim_with_it(dj_inbox: Any, ledger: Any) -> None:
    with pytest.raises(BoomError), transaction.atomic(using=ledger.alias):
        _deliver(dj_inbox, ledger, "c-3", {"amount": 5})  # a savepoint, released
        raise BoomError
    assert ledger.applied() == []
    assert dj_inbox.lookup("billing", "c-3") is None


def test_dj1_values_are_bound_never_rendered(dj_inbox: Any, ledger: Any) -> None:
    awkward = "it's 100%s ; DROP TABLE x; -- 😀"
    payload = {"note": "50% off, 'quoted' %(name)s"}
    entry = _deliver(dj_inbox, ledger, awkward, payload)
    assert not entry.duplicate
    record = dj_inbox.lookup("billing", awkward)
    assert record is not None
    assert record.command_id == awkward
    assert _deliver(dj_inbox, ledger, awkward, payload).duplicate
    assert ledger.applied() == [awkward]
