"""The store conformance suite: the inbox's store-independent guarantees as
test cases a store's own test suite inherits.

Subclass :class:`InboxStoreSuite` in a test module and give it a ``store``
fixture yielding a :class:`StoreHarness` on an isolated store; every test of
the suite then runs on it::

    from inboxguard.testing.conformance import InboxStoreSuite

    class TestMyStore(InboxStoreSuite):
        @pytest.fixture
        def store(self):
            with my_isolated_store() as harness:
                yield harness

Each test names the guarantee it checks (G1..G8 of docs/guarantees.md, X9
and X10 of docs/testing.md). A store that cannot do something (a batch
claim, an asyncio guard, partitions) declares it in its
:class:`~inboxguard.StoreCapabilities`, and the suite checks that it refuses
the call with a :class:`~inboxguard.ConfigurationError` and writes nothing.

Rules for a harness:

- ``inbox()`` may be called several times in one test (another clock,
  another retention): every inbox of one store shares its evidence and
  quarantine, and is built with a short lock timeout (at most about 1 s, the
  database's own rounding aside; :data:`SHORT_LOCK_TIMEOUT`) so the
  in-progress test stays fast;
- errors are the classes of :mod:`inboxguard.errors`, never store-specific.

This module imports pytest: import it from test code only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from typing import Any

import pytest

from inboxguard import (
    BeyondRetentionError,
    ConfigurationError,
    InboxStore,
    InProgressError,
    InvalidCommandError,
    PayloadEncodingError,
    PayloadMismatchError,
    RetentionPolicy,
)
from inboxguard.inbox import is_inbox_store, is_sql_store
from inboxguard.testing._clock import ManualClock
from inboxguard.testing._harness import SHORT_LOCK_TIMEOUT, StoreHarness, run_in_threads

__all__ = ["SHORT_LOCK_TIMEOUT", "InboxStoreSuite", "StoreHarness", "run_in_threads"]

#: The retention every suite test runs with.
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


class InboxStoreSuite:
    """The conformance suite of an inbox store: subclass it with a ``store``
    fixture (see the module's documentation)."""

    def test_g01_claim_commits_with_the_mutation_or_not_at_all(self, store: StoreHarness) -> None:
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

    def test_g02_duplicate_skips_and_returns_the_stored_result(self, store: StoreHarness) -> None:
        """G2: the same command with the same payload is a duplicate carrying the
        first delivery's result; the mutation is applied once."""
        box = store.inbox(retention=POLICY)
        assert _deliver(store, box, "g2", {"n": 1}, result=[1, "a"]) == (False, [1, "a"])
        for _ in range(2):
            assert _deliver(store, box, "g2", {"n": 1}, result="ignored") == (True, [1, "a"])
        assert store.applied() == ["g2"]

    def test_g03_mismatch_fails_closed_and_its_quarantine_survives(
        self, store: StoreHarness
    ) -> None:
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

    def test_g04_racing_deliveries_apply_each_command_once(self, store: StoreHarness) -> None:
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
        assert sum(r for r in results if isinstance(r, int)) == len(ids)
        assert sorted(store.applied()) == sorted(ids)

    def test_g04_a_held_claim_is_in_progress_then_a_duplicate(self, store: StoreHarness) -> None:
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

    def test_g05_scope_is_per_consumer(self, store: StoreHarness) -> None:
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
        self, store: StoreHarness, consumer: Any, command_id: Any
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

    def test_g06_unencodable_payload_or_result_loses_nothing(self, store: StoreHarness) -> None:
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

    def test_g08_beyond_retention_is_refused_and_quarantined(self, store: StoreHarness) -> None:
        """G8: a message sent before the horizon is refused (quarantined, block not
        run, no evidence); one inside it is processed, its evidence kept to the horizon."""
        clock = ManualClock()
        box = store.inbox(retention=POLICY, clock=clock)
        old = clock() - dt.timedelta(days=31)
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
        recent = clock() - dt.timedelta(days=29)
        assert _deliver(store, box, "new", {}, sent_at=recent) == (False, None)
        evidence = store.evidence("c", "new")
        assert evidence is not None
        assert evidence["expires_at"] == clock() + POLICY.horizon
        assert store.applied() == ["new"]

    def test_x09_the_store_is_an_inbox_store_and_says_what_it_can_do(
        self, store: StoreHarness
    ) -> None:
        """X9: the inbox implements :class:`~inboxguard.InboxStore` and declares
        its capabilities; a SQL store is one whose evidence is in a database."""
        box = store.inbox(retention=POLICY)
        assert is_inbox_store(box)
        assert isinstance(box, InboxStore)
        caps = box.capabilities
        assert caps.local in {"db", "redis"}
        assert caps.transaction in {"session", "pipeline"}
        assert is_sql_store(box) == (caps.local == "db")
        assert not (caps.batch and caps.partitioning), "a batch claims no partitioned inbox"
        assert box.retention == POLICY

    def test_x10_what_a_store_cannot_do_it_refuses_and_writes_nothing(
        self, store: StoreHarness
    ) -> None:
        """X10: each capability the store declares it lacks is refused with a
        ConfigurationError, nothing stored; a batch it declares claims once."""
        box = store.inbox(retention=POLICY)
        caps = box.capabilities
        commands = [("x10-a", {"n": 1}), ("x10-b", {"n": 2})]
        if caps.batch:
            for attempt in range(2):
                with store.transaction() as tx:
                    with store.guard_batch(box, tx, consumer="c", commands=commands) as batch:
                        for entry in batch.fresh:
                            store.mutate(tx, entry.command_id, 1)
                assert len(batch.fresh) == (2 if attempt == 0 else 0)
            assert sorted(store.applied()) == ["x10-a", "x10-b"]
        else:
            with pytest.raises(ConfigurationError, match="batch"):
                with store.transaction() as tx:
                    with store.guard_batch(box, tx, consumer="c", commands=commands):
                        pass
            with pytest.raises(ConfigurationError, match="batch"):
                box.guard_batch_async(None, consumer="c", commands=commands)
        if not caps.async_guard:
            with pytest.raises(ConfigurationError):
                _enter_async(box.guard_async(None, consumer="c", command_id="x10-c", payload={}))
            with pytest.raises(ConfigurationError):
                box.handler_async(consumer="c", command_id="id")
        if is_sql_store(box) and not caps.partitioning:
            with pytest.raises(ConfigurationError, match="partition"):
                box.create_partitions()
        assert store.evidence("c", "x10-c") is None
        if not caps.batch:
            assert store.applied() == []
            assert store.evidence("c", "x10-a") is None


def _enter_async(manager: Any) -> None:
    """Enter an async context manager (the refusal may come at the call or here)."""

    async def enter() -> None:
        async with manager:
            pass

    asyncio.run(enter())
