"""L7: the five failure cases, in one process, on SQLite, PostgreSQL and MariaDB.

Each asserts the provider's request count, the effects it really applied, the
ledger's state and version, the number of durable receipts, and what the
caller saw. The same cases run with real processes on PostgreSQL in
test_processes.py.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from inboxguard import (
    EffectLedger,
    EffectOutcomeUnknownError,
    EffectState,
    Receipt,
    ReconciliationRequiredError,
    StaleLeaseError,
    is_retryable,
)
from inboxguard.effects import EffectRecord
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock
from tests.effects.conftest import LEASE, WINDOW, Killed, dies_after_charge
from tests.helpers import wait_until

KEY = "invoice-7/charge"
PAYLOAD = {"amount": 1500, "currency": "EUR"}


def record_of(ledger: EffectLedger) -> EffectRecord:
    record = ledger.get(KEY)
    assert record is not None
    return record


def receipts(record: EffectRecord) -> int:
    """Durable receipts: outcomes recorded as applied (one row holds at most one)."""
    return sum(1 for t in record.history if t.event in {"confirm", "reconcile"})


# -- 1. the worker dies after the provider accepted the call ---------------------------


def test_l07_case1_killed_after_accept_retry_looks_up(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock
) -> None:
    with pytest.raises(Killed), dies_after_charge(gateway):
        ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    dead = record_of(ledger)
    assert (dead.state, dead.version, dead.lease_owner is not None) == (
        EffectState.PREPARED,
        1,
        True,
    )
    # The redelivery comes before the lease expires: it waits, sending nothing.
    with pytest.raises(EffectOutcomeUnknownError, match="holds its lease") as busy:
        ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    assert is_retryable(busy.value)
    clock.advance(LEASE)
    receipt = ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    record = record_of(ledger)
    assert receipt == record.receipt == Receipt("ch_1", {"idempotency_key": KEY})
    assert (record.state, record.version, record.fencing_token) == (EffectState.CONFIRMED, 3, 2)
    assert [t.event for t in record.history] == ["prepare", "takeover", "confirm"]
    assert record.history[-1].note == "found by lookup"
    assert (gateway.requests(), gateway.requests("lookup"), gateway.charges()) == (1, 1, 1)
    assert receipts(record) == 1


def test_l07_case1_without_lookup_resends_the_same_key_inside_the_window(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    with pytest.raises(Killed), dies_after_charge(blind_gateway):
        ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    clock.advance(LEASE)
    receipt = ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    record = record_of(ledger)
    assert receipt.reference == "ch_1"  # the provider replayed the first charge
    assert (record.state, record.version, record.attempts) == (EffectState.CONFIRMED, 4, 2)
    assert [t.event for t in record.history] == ["prepare", "takeover", "resend", "confirm"]
    assert (blind_gateway.requests(), blind_gateway.charges()) == (2, 1)
    assert receipts(record) == 1


# -- 2. the same task delivered to two workers at once --------------------------------


def test_l07_case2_two_workers_at_once_one_call_one_receipt(
    ledger: EffectLedger, any_gateway: SandboxGateway
) -> None:
    inside, release = threading.Event(), threading.Event()

    def hold(key: str) -> None:
        inside.set()
        assert release.wait(30)

    any_gateway.after_apply = hold
    with ThreadPoolExecutor(1) as pool:
        first: Future[Receipt] = pool.submit(ledger.execute, KEY, any_gateway, PAYLOAD, lease=LEASE)
        assert inside.wait(30)
        with pytest.raises(EffectOutcomeUnknownError) as second:
            ledger.execute(KEY, any_gateway, PAYLOAD, lease=LEASE)
        assert second.value.state == "prepared"
        release.set()
        receipt = first.result(30)
    any_gateway.after_apply = None
    assert ledger.execute(KEY, any_gateway, PAYLOAD, lease=LEASE) == receipt
    record = record_of(ledger)
    assert (record.state, record.version) == (EffectState.CONFIRMED, 2)
    assert (any_gateway.requests(), any_gateway.requests("lookup"), any_gateway.charges()) == (
        1,
        0,
        1,
    )
    assert receipts(record) == 1


# -- 3. a lease expires while the first worker is still running ------------------------


def test_l07_case3_expired_lease_late_completion_is_stale(
    ledger: EffectLedger, any_gateway: SandboxGateway, clock: FakeClock
) -> None:
    inside, release = threading.Event(), threading.Event()

    def stall(key: str) -> None:
        inside.set()
        assert release.wait(30)

    any_gateway.after_apply = stall
    with ThreadPoolExecutor(1) as pool:
        slow: Future[Receipt] = pool.submit(ledger.execute, KEY, any_gateway, PAYLOAD, lease=LEASE)
        assert inside.wait(30)
        any_gateway.after_apply = None
        clock.advance(LEASE)
        receipt = ledger.execute(KEY, any_gateway, PAYLOAD, lease=LEASE)
        release.set()
        with pytest.raises(StaleLeaseError) as stale:
            slow.result(30)
    assert (stale.value.token, stale.value.current_token) == (1, 2)
    assert is_retryable(stale.value)
    record = record_of(ledger)
    assert record.state is EffectState.CONFIRMED
    assert record.receipt == receipt
    assert receipt.reference == "ch_1"
    lookup = any_gateway.contract.supports_lookup
    assert record.version == (3 if lookup else 4)
    assert any_gateway.requests() == (1 if lookup else 2)
    assert any_gateway.charges() == 1
    assert receipts(record) == 1
    # The fenced-out worker's redelivery gets the outcome the new holder recorded.
    assert ledger.execute(KEY, any_gateway, PAYLOAD, lease=LEASE) == receipt


def test_l07_case3_expired_but_not_taken_over_the_late_result_counts(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock
) -> None:
    """The fencing token, not the clock, decides: a lease that expired while
    nobody took it over still records its holder's result."""
    inside, release = threading.Event(), threading.Event()

    def stall(key: str) -> None:
        inside.set()
        assert release.wait(30)

    gateway.after_apply = stall
    with ThreadPoolExecutor(1) as pool:
        slow: Future[Receipt] = pool.submit(ledger.execute, KEY, gateway, PAYLOAD, lease=LEASE)
        assert inside.wait(30)
        clock.advance(LEASE * 10)
        release.set()
        receipt = slow.result(30)
    record = record_of(ledger)
    assert (record.state, record.version, record.fencing_token) == (EffectState.CONFIRMED, 2, 1)
    assert record.receipt == receipt
    assert (gateway.requests(), gateway.requests("lookup"), gateway.charges()) == (1, 0, 1)


# -- 4. a retry after the provider's idempotency window -------------------------------


def test_l07_case4_after_the_window_lookup_settles_it(
    ledger: EffectLedger, gateway: SandboxGateway, clock: FakeClock
) -> None:
    gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    clock.advance(WINDOW * 2)
    receipt = ledger.execute(KEY, gateway, PAYLOAD, lease=LEASE)
    record = record_of(ledger)
    assert receipt == record.receipt
    assert (record.state, record.applied, record.version) == (EffectState.RECONCILED, True, 4)
    assert (gateway.requests(), gateway.requests("lookup"), gateway.charges()) == (1, 1, 1)
    assert receipts(record) == 1


def test_l07_case4_after_the_window_without_lookup_nothing_is_sent(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    blind_gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    clock.advance(WINDOW)
    for _ in range(2):
        with pytest.raises(ReconciliationRequiredError) as info:
            ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
        assert not is_retryable(info.value)
    assert info.value.window_ends_at == record_of(ledger).first_sent_at + WINDOW
    record = record_of(ledger)
    assert (record.state, record.version, record.attempts) == (EffectState.UNKNOWN, 6, 1)
    assert (blind_gateway.requests(), blind_gateway.charges()) == (1, 1)
    assert receipts(record) == 0
    # The operator checks the provider and records what happened.
    done = ledger.resolve(KEY, applied=True, receipt=Receipt("ch_1"), note="seen in dashboard")
    assert (done.state, done.applied) == (EffectState.RECONCILED, True)
    assert done.receipt == Receipt("ch_1")
    assert ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE) == Receipt("ch_1")
    assert blind_gateway.requests() == 1


def test_l07_case4_lease_margin_near_the_window_end_is_not_resent(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    """A re-send must be able to arrive before the window closes: within one
    lease of its end, the ledger no longer re-sends."""
    blind_gateway.script = ["timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    clock.advance(WINDOW - LEASE)
    with pytest.raises(ReconciliationRequiredError):
        ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    assert (blind_gateway.requests(), blind_gateway.charges()) == (0, 0)


def test_l07_case4_inside_the_window_an_unknown_is_resent_with_the_same_key(
    ledger: EffectLedger, blind_gateway: SandboxGateway, clock: FakeClock
) -> None:
    blind_gateway.script = ["accept_then_timeout"]
    with pytest.raises(EffectOutcomeUnknownError):
        ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    clock.advance(WINDOW / 2)
    receipt = ledger.execute(KEY, blind_gateway, PAYLOAD, lease=LEASE)
    record = record_of(ledger)
    assert receipt.reference == "ch_1"
    assert (record.state, record.applied, record.attempts) == (EffectState.RECONCILED, True, 2)
    assert (blind_gateway.requests(), blind_gateway.charges()) == (2, 1)


# -- 5. one effect and one receipt across all of the above ----------------------------


def test_l07_case5_control_a_blind_resend_after_the_window_charges_twice(
    gateway: SandboxGateway, clock: FakeClock
) -> None:
    """The gateway really forgets: without the ledger, a late retry duplicates."""
    gateway.send(KEY, PAYLOAD)
    clock.advance(WINDOW)
    gateway.send(KEY, PAYLOAD)
    assert gateway.charges(KEY) == 2


@pytest.mark.parametrize("lookup", [True, False], ids=["lookup", "no-lookup"])
def test_l07_case5_one_effect_one_receipt_through_every_failure(
    ledger: EffectLedger,
    gateway: SandboxGateway,
    blind_gateway: SandboxGateway,
    clock: FakeClock,
    lookup: bool,
) -> None:
    """Accept-then-timeout, a kill after accept, a duplicate while the dead
    worker's lease runs, an expired lease with a late completion, and retries
    far past the forgetting window: one effect at the provider, one receipt in
    the ledger, and every caller that got an answer got the same one."""
    gw = gateway if lookup else blind_gateway
    outcomes: list[str] = []

    def attempt() -> None:
        try:
            outcomes.append(ledger.execute(KEY, gw, PAYLOAD, lease=LEASE).reference)
        except (EffectOutcomeUnknownError, StaleLeaseError, ReconciliationRequiredError) as e:
            outcomes.append(type(e).__name__)
        except Killed:
            outcomes.append("killed")

    inside, release = threading.Event(), threading.Event()

    def stall(key: str) -> None:
        inside.set()
        assert release.wait(30)

    gw.script = ["accept_then_timeout"]
    attempt()  # the response is lost: unknown
    with dies_after_charge(gw):
        attempt()  # without lookup: a same-key re-send, accepted (replayed), then the worker dies
    attempt()  # without lookup: the dead worker's lease still runs
    clock.advance(LEASE)
    gw.after_apply = stall
    with ThreadPoolExecutor(1) as pool:
        late = pool.submit(attempt)  # without lookup: re-sends and stalls after the provider
        wait_until(lambda: late.done() or inside.is_set(), 30)
        gw.after_apply = None
        clock.advance(LEASE)
        attempt()  # takes the lease over and settles it
        release.set()
        late.result(30)
    clock.advance(WINDOW * 3)
    attempt()
    attempt()
    record = record_of(ledger)
    assert gw.charges() == 1
    assert receipts(record) == 1
    assert record.receipt is not None
    assert record.receipt.reference == "ch_1"
    assert (record.state, record.applied) == (EffectState.RECONCILED, True)
    assert outcomes[0] == "EffectOutcomeUnknownError"
    assert outcomes[-2:] == ["ch_1", "ch_1"]
    answers = {o for o in outcomes if o.startswith("ch_")}
    assert answers == {"ch_1"}
    if lookup:  # the first retry looked it up; nothing was ever sent twice
        assert outcomes == ["EffectOutcomeUnknownError"] + ["ch_1"] * 6
        assert (gw.requests(), gw.requests("lookup")) == (1, 1)
    else:  # every failure really happened, and each re-send reused the key
        assert outcomes == [
            "EffectOutcomeUnknownError",
            "killed",
            "EffectOutcomeUnknownError",
            "ch_1",
            "StaleLeaseError",
            "ch_1",
            "ch_1",
        ]
        assert gw.requests() == 4
