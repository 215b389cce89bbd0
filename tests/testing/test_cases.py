"""X4-X6: the failure cases and assert_effectively_once, on SQLite, PostgreSQL
and MariaDB, against a handler that is right and one that is not."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import Receipt
from inboxguard.testing import (
    EffectivelyOnceError,
    FakeProvider,
    FaultKit,
    FaultPoint,
    ManualClock,
    assert_effectively_once,
)

MESSAGE = {"invoice": 7, "amount": 1500}
CONSUMER = "billing.charge"
KEY = "invoice-7/charge"
Handler = Callable[[dict[str, Any]], Any]


@pytest.fixture
def kit(engine: Engine, prefix: str) -> Iterator[FaultKit]:
    clock = ManualClock()
    inbox = inboxguard.Inbox(
        engine, retention=dt.timedelta(days=7), table_prefix=prefix, clock=clock
    )
    ledger = inboxguard.EffectLedger(engine, table_prefix=prefix, clock=clock)
    inbox.create_schema()
    ledger.create_schema()
    yield FaultKit(inbox, ledger=ledger, provider=FakeProvider(clock=clock), clock=clock)
    ledger.drop_schema()
    inbox.drop_schema()


def handler_of(kit: FaultKit, *, ledger: bool = True) -> Handler:
    """Charge through the ledger (or, when ``ledger`` is false, straight at the
    provider: the mistake the kit must catch), then guard the record."""
    assert kit.ledger is not None
    assert kit.provider is not None
    book, provider = kit.ledger, kit.provider

    def charge(message: dict[str, Any]) -> Any:
        payload = {"amount": message["amount"]}
        receipt = book.execute(KEY, provider, payload) if ledger else provider.send(KEY, payload)
        with Session(kit.inbox.engine) as session, session.begin():
            with kit.inbox.guard(
                session,
                consumer=CONSUMER,
                command_id=KEY,
                payload=message,
                sent_at=dt.datetime.fromisoformat(message["sent"]) if "sent" in message else None,
            ) as entry:
                if not entry.duplicate:
                    entry.result = receipt.reference
        return entry.result

    return charge


def test_x4_duplicate_and_concurrent_deliveries_take_effect_once(kit: FaultKit) -> None:
    twice = kit.deliver_twice(handler_of(kit), MESSAGE)
    assert (twice.deliveries, twice.handler_runs, twice.provider_requests) == (2, 1, 1)
    assert (twice.receipts, twice.inbox_state, twice.ledger_state) == (1, "committed", "confirmed")
    assert twice.outcomes == ["acked", "acked"]
    assert_effectively_once(twice)
    racing = kit.deliver_concurrently(handler_of(kit), {**MESSAGE}, workers=3)
    assert racing.deliveries >= 3
    assert racing.handler_runs == 0
    assert_effectively_once(racing)
    assert kit.provider is not None
    assert kit.provider.effects == 1


@pytest.mark.parametrize("point", [p for p in FaultPoint if p is not FaultPoint.HANDLER_RUNS])
def test_x4_a_crash_at_each_point_is_redelivered_and_takes_effect_once(
    kit: FaultKit, point: FaultPoint
) -> None:
    record = kit.crash(handler_of(kit), MESSAGE, at=point)
    assert record.outcomes == [f"crashed at {point}", "acked"]
    # Before the commit the claim rolled back, so the handler runs again;
    # after it the redelivery is a duplicate.
    runs = 2 if point is FaultPoint.BEFORE_COMMIT else 1
    assert (record.deliveries, record.handler_runs, record.provider_effects) == (2, runs, 1)
    assert_effectively_once(record)


def test_x4_an_expired_lease_fences_the_late_worker(kit: FaultKit) -> None:
    record = kit.expire_lease(handler_of(kit), MESSAGE)
    assert record.outcomes[0] == "retry: StaleLeaseError"
    assert (record.provider_requests, record.provider_effects, record.receipts) == (1, 1, 1)
    assert_effectively_once(record)


@pytest.mark.parametrize("lookup", [True, False], ids=["lookup", "no-lookup"])
def test_x5_a_retry_after_the_window_is_settled_or_left_for_an_operator(
    kit: FaultKit, lookup: bool
) -> None:
    assert kit.provider is not None
    kit.provider.supports_lookup = lookup
    record = kit.retry_after_window(handler_of(kit), MESSAGE)
    assert (record.provider_requests, record.provider_effects) == (1, 1)
    if lookup:
        assert record.ledger_state == "reconciled"
        assert_effectively_once(record)
        return
    assert record.outcomes[-1] == "dead-lettered: ReconciliationRequiredError"
    assert (record.ledger_state, record.receipts, record.inbox_state) == ("unknown", 0, "absent")
    with pytest.raises(EffectivelyOnceError, match="is unknown") as wrong:
        assert_effectively_once(record, consumer=CONSUMER, command_id=KEY)
    assert f"inbox: 0 rows for ({CONSUMER!r}, {KEY!r})" in str(wrong.value)
    # An operator finds the charge at the provider; the replayed message then completes.
    assert kit.ledger is not None
    kit.ledger.resolve(KEY, applied=True, receipt=Receipt("fx_1"), note="seen at the provider")
    replay = kit.deliver(handler_of(kit), MESSAGE)
    assert (replay.outcomes, replay.provider_requests) == (["acked"], 1)
    assert_effectively_once(replay, ledger_state="reconciled")


def test_x5_a_replay_older_than_retention_is_refused_when_it_carries_its_sent_time(
    kit: FaultKit,
) -> None:
    record = kit.replay_after_retention(handler_of(kit), MESSAGE, sent_at_key="sent")
    assert record.outcomes == ["acked", "dead-lettered: BeyondRetentionError"]
    assert record.inbox_state == "absent, quarantined (beyond_retention)"
    assert (record.handler_runs, record.provider_effects) == (1, 1)


def test_x6_the_assertion_names_what_is_wrong(kit: FaultKit) -> None:
    """A handler that calls the provider without the ledger: inside the
    provider's window its own key saves it, but the assertion (given the
    ledger) names the missing effect and nothing else."""
    record = kit.crash(handler_of(kit, ledger=False), MESSAGE, at=FaultPoint.BEFORE_COMMIT)
    assert (record.handler_runs, record.provider_requests, record.provider_effects) == (2, 2, 1)
    with pytest.raises(EffectivelyOnceError) as wrong:
        assert_effectively_once(record)
    text = str(wrong.value)
    assert f"command {KEY!r} of {CONSUMER!r} was not applied effectively once" in text
    assert f"ledger: no effect {KEY!r}" in text
    assert "inbox:" not in text
    assert "provider:" not in text


def test_x6_without_the_ledger_a_window_retry_duplicates_and_the_assertion_says_so(
    kit: FaultKit,
) -> None:
    assert kit.provider is not None
    assert kit.clock is not None
    broken = handler_of(kit, ledger=False)
    kit.provider.fail_next("accept_then_timeout")
    first = kit.deliver(broken, MESSAGE)
    assert first.outcomes[0].startswith("failed: TimeoutError")
    kit.clock.advance(hours=25)
    again = kit.deliver(broken, MESSAGE)
    assert again.outcomes == ["acked"]
    with pytest.raises(EffectivelyOnceError) as wrong:
        assert_effectively_once(again, ledger=None)
    assert f"provider: 2 effects for key {KEY!r}" in str(wrong.value)


def test_x6_the_kit_refuses_what_it_cannot_play(kit: FaultKit) -> None:
    bare = FaultKit(kit.inbox)
    with pytest.raises(inboxguard.ConfigurationError, match="clock=ManualClock"):
        bare.expire_lease(print, MESSAGE)
    with pytest.raises(inboxguard.ConfigurationError, match="handler must be"):
        kit.deliver(42, MESSAGE)

    async def async_handler(message: dict[str, Any]) -> None: ...

    with pytest.raises(inboxguard.ConfigurationError, match="async def"):
        kit.deliver(async_handler, MESSAGE)
    with pytest.raises(inboxguard.ConfigurationError, match="workers must be"):
        kit.deliver_concurrently(print, MESSAGE, workers=0)
    with pytest.raises(inboxguard.ConfigurationError, match="max_deliveries"):
        FaultKit(kit.inbox, max_deliveries=0)
    with pytest.raises(inboxguard.ConfigurationError, match="must be a mapping"):
        kit.deliver(print, ["not", "a", "mapping"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unknown keyword"):
        kit.deliver(print, MESSAGE, commandid="x")
    with pytest.raises(TypeError, match="needs inbox="):
        assert_effectively_once(inbox=kit.inbox)
