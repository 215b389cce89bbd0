"""The inbox's store-independent guarantees, once, on every store of the registry.

Each test names the guarantee it checks (G1..G8 of docs/guarantees.md); the
store-specific tests (SQL dialect details, Redis eviction, ...) live beside
their store. Every store raises the same :mod:`inboxguard.errors` classes.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest

from inboxguard import (
    BeyondRetentionError,
    InProgressError,
    InvalidCommandError,
    PayloadEncodingError,
    PayloadMismatchError,
    RetentionPolicy,
)
from tests.conftest import FakeClock
from tests.stores.harness import StoreHarness

POLICY = RetentionPolicy(dead_letter_replay=dt.timedelta(days=30), margin=dt.timedelta(days=1))


def _deliver(
    store: StoreHarness,
    box: Any,
    command_id: str,
    payload: Any,
    *,
    consumer: str = "c",
    amount: int = 1,
    result: Any = None,
    sent_at: dt.datetime | None = None,
) -> tuple[bool, Any]:
    """One delivery in its own transaction: (duplicate, the entry's result)."""
    with store.transaction() as tx:
        with store.guard(
            box, tx, consumer=consumer, command_id=command_id, payload=payload, sent_at=sent_at
        ) as entry:
            if not entry.duplicate:
                store.mutate(tx, command_id, amount)
                entry.result = result
    return entry.duplicate, entry.result


def test_g01_claim_commits_with_the_mutation_or_not_at_all(store: StoreHarness) -> None:
    """G1: a block that raises leaves neither the mutation nor the evidence, and
    the redelivery is fresh; a block that exits commits both, result included."""
    box = store.inbox(retention=POLICY)
    with pytest.raises(RuntimeError, match="handler failed"):
        with store.transaction() as tx:
            with store.guard(box, tx, consumer="c", command_id="g1", payload={"n": 1}) as e:
                store.mutate(tx, "g1", 5)
                e.result = {"ok": False}
                raise RuntimeError("handler failed")
    assert store.applied() == []
    assert store.evidence("c", "g1") is None
    assert _deliver(store, box, "g1", {"n": 1}, result={"ok": True}) == (False, {"ok": True})
    assert store.applied() == ["g1"]
    evidence = store.evidence("c", "g1")
    assert evidence is not None
    assert evidence["result"] == {"ok": True}


def test_g02_duplicate_skips_and_returns_the_stored_result(store: StoreHarness) -> None:
    """G2: the same command with the same payload is a duplicate carrying the
    first delivery's result; the mutation is applied once."""
    box = store.inbox(retention=POLICY)
    assert _deliver(store, box, "g2", {"n": 1}, result=[1, "a"]) == (False, [1, "a"])
    for _ in range(2):
        assert _deliver(store, box, "g2", {"n": 1}, result="ignored") == (True, [1, "a"])
    assert store.applied() == ["g2"]


def test_g03_mismatch_fails_closed_and_its_quarantine_survives(store: StoreHarness) -> None:
    """G3: the same ID with another payload raises PayloadMismatchError before the
    block runs; the record is quarantined although the transaction was discarded,
    and the evidence is unchanged."""
    box = store.inbox(retention=POLICY)
    _deliver(store, box, "g3", {"n": 1}, result="first")
    before = store.evidence("c", "g3")
    ran = []
    with pytest.raises(PayloadMismatchError) as caught:
        with store.transaction() as tx:
            with store.guard(box, tx, consumer="c", command_id="g3", payload={"n": 2}):
                ran.append(1)
                store.mutate(tx, "g3", 2)
    err = caught.value
    assert ran == []
    assert not err.retryable
    assert err.stored_digest == before["digest"]  # type: ignore[index]
    assert store.applied() == ["g3"]
    assert store.evidence("c", "g3") == before
    (record,) = store.quarantine("c", "g3")
    assert record["reason"] == "payload_mismatch"
    assert record["incoming_digest"] == err.incoming_digest != err.stored_digest


def test_g04_racing_deliveries_apply_each_command_once(store: StoreHarness) -> None:
    """G4: threads deliver the same commands at once, in different orders; a
    claim held by another transaction is retried; each command applies once."""
    box = store.inbox(retention=POLICY)
    ids = [f"race-{i}" for i in range(12)]
    turn = iter(range(100))
    lock = threading.Lock()

    def worker() -> int:
        with lock:
            k = next(turn)
        order = ids[3 * k :] + ids[: 3 * k]  # each thread starts elsewhere,
        if k % 2:  # and every other one walks backwards
            order.reverse()
        fresh, deadline = 0, time.monotonic() + 30
        pending = list(order)
        while pending:
            cid = pending.pop(0)
            try:
                duplicate, _ = _deliver(store, box, cid, {"id": cid})
            except InProgressError:
                assert time.monotonic() < deadline, "a claim stayed in progress for 30 s"
                pending.append(cid)
            else:
                fresh += not duplicate
        return fresh

    results = store.run_concurrently(4, worker)
    assert not [r for r in results if isinstance(r, BaseException)], results
    assert sum(results) == len(ids)
    assert sorted(store.applied()) == sorted(ids)


def test_g04_a_held_claim_is_in_progress_then_a_duplicate(store: StoreHarness) -> None:
    """G4: while one transaction holds a fresh claim, another delivery of the
    command raises the retryable InProgressError (after the store's short lock
    timeout); once the holder commits, the redelivery is a duplicate."""
    box = store.inbox(retention=POLICY)
    holding, release = threading.Event(), threading.Event()

    def holder() -> None:
        with store.transaction() as tx:
            with store.guard(box, tx, consumer="c", command_id="held", payload={}) as entry:
                store.mutate(tx, "held", 1)
                entry.result = "done"
                holding.set()
                assert release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert holding.wait(30)
        ran = []
        with pytest.raises(InProgressError) as caught:
            with store.transaction() as tx:
                with store.guard(box, tx, consumer="c", command_id="held", payload={}):
                    ran.append(1)
        assert caught.value.retryable
        assert ran == []
    finally:
        release.set()
        thread.join(30)
    assert _deliver(store, box, "held", {}) == (True, "done")
    assert store.applied() == ["held"]


def test_g05_scope_is_per_consumer(store: StoreHarness) -> None:
    """G5: one command ID under two consumers is two commands."""
    box = store.inbox(retention=POLICY)
    assert _deliver(store, box, "same", {}, consumer="billing", result="b") == (False, "b")
    assert _deliver(store, box, "same", {}, consumer="shipping", result="s") == (False, "s")
    assert _deliver(store, box, "same", {}, consumer="billing") == (True, "b")
    assert store.applied() == ["same", "same"]


@pytest.mark.parametrize(
    ("consumer", "command_id"), [("c", ""), ("c", None), ("c", 7), ("c", "a\nb"), ("", "ok")]
)
def test_g06_bad_identity_is_refused_and_writes_nothing(
    store: StoreHarness, consumer: Any, command_id: Any
) -> None:
    """G6: an unusable consumer or command ID raises InvalidCommandError; the
    block never runs and nothing is stored."""
    box = store.inbox(retention=POLICY)
    ran = []
    with pytest.raises(InvalidCommandError):
        with store.transaction() as tx:
            with store.guard(box, tx, consumer=consumer, command_id=command_id, payload={}):
                ran.append(1)
    assert ran == []
    assert store.applied() == []


def test_g06_unencodable_payload_or_result_loses_nothing(store: StoreHarness) -> None:
    """G6: a payload without a canonical encoding is refused before the claim; a
    result without one fails the block, nothing commits, and the redelivery is fresh."""
    box = store.inbox(retention=POLICY)
    with pytest.raises(PayloadEncodingError, match=r"payload\['when'\]"):
        with store.transaction() as tx:
            with store.guard(
                box, tx, consumer="c", command_id="p", payload={"when": dt.datetime(2026, 1, 1)}
            ):
                pass
    assert store.evidence("c", "p") is None
    with pytest.raises(PayloadEncodingError, match=r"result"):
        _deliver(store, box, "r", {}, result={"obj": object()})
    assert store.applied() == []
    assert store.evidence("c", "r") is None
    assert _deliver(store, box, "r", {}, result=1) == (False, 1)
    assert store.applied() == ["r"]


def test_g08_beyond_retention_is_refused_and_quarantined(store: StoreHarness) -> None:
    """G8: a message sent before the horizon is refused (quarantined, block not
    run, no evidence); one inside it is processed, its evidence kept to the horizon."""
    clock = FakeClock()
    box = store.inbox(retention=POLICY, clock=clock)
    old = clock.now - dt.timedelta(days=31)
    ran = []
    with pytest.raises(BeyondRetentionError) as caught:
        with store.transaction() as tx:
            with store.guard(box, tx, consumer="c", command_id="old", payload={}, sent_at=old):
                ran.append(1)
    assert ran == []
    assert caught.value.sent_at == old
    assert store.evidence("c", "old") is None
    (record,) = store.quarantine("c", "old")
    assert record["reason"] == "beyond_retention"
    recent = clock.now - dt.timedelta(days=29)
    assert _deliver(store, box, "new", {}, sent_at=recent) == (False, None)
    evidence = store.evidence("c", "new")
    assert evidence is not None
    assert evidence["expires_at"] == clock.now + POLICY.horizon
    assert store.applied() == ["new"]
