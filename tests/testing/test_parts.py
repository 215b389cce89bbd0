"""X1-X3: the kit's parts: the fault point, the manual clock, the fake provider."""

from __future__ import annotations

import datetime as dt

import pytest

from inboxguard import ConfigurationError, ProviderRejectedError
from inboxguard._core import faults
from inboxguard.testing import Crash, FakeProvider, FaultPoint, ManualClock, crash_at


def test_x1_no_hook_is_armed_outside_a_case() -> None:
    assert faults.hook is None
    faults.reach(FaultPoint.BEFORE_COMMIT, "c-1")  # nothing happens


def test_x1_a_crash_cannot_be_swallowed_by_handler_code() -> None:
    def handler() -> str:
        try:
            faults.reach(FaultPoint.BEFORE_COMMIT, "c-1")
        except Exception:  # what careless handler code does
            return "swallowed"
        return "went on"

    with crash_at(FaultPoint.BEFORE_COMMIT, key="c-1") as tap, pytest.raises(Crash) as crash:
        handler()
    assert (crash.value.point, crash.value.key) == (FaultPoint.BEFORE_COMMIT, "c-1")
    assert not isinstance(crash.value, Exception)
    assert len(tap.crashes) == 1
    assert faults.hook is None  # disarmed on exit
    assert handler() == "went on"


def test_x1_a_crash_rule_fires_for_its_key_and_its_count_only() -> None:
    with crash_at("before_ack", key="c-2", times=2) as tap:
        faults.reach(FaultPoint.BEFORE_ACK, "c-1")
        faults.reach(FaultPoint.BEFORE_COMMIT, "c-2")
        for _ in range(2):
            with pytest.raises(Crash):
                faults.reach(FaultPoint.BEFORE_ACK, "c-2")
        faults.reach(FaultPoint.BEFORE_ACK, "c-2")
    assert [c.key for c in tap.crashes] == ["c-2", "c-2"]


def test_x2_the_clock_moves_only_when_told() -> None:
    clock = ManualClock(dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))))
    start = clock()
    assert start.tzinfo is dt.UTC
    assert clock() == start
    assert clock.advance(minutes=5) == start + dt.timedelta(minutes=5)
    assert clock.advance(dt.timedelta(hours=1)) == start + dt.timedelta(minutes=65)
    for bad in ({"args": ()}, {"args": (dt.timedelta(1),), "minutes": 1}):
        with pytest.raises(ValueError, match="advance"):
            clock.advance(*bad.pop("args"), **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        clock.advance(seconds=-1)
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        ManualClock(dt.datetime(2026, 1, 1))


def test_x3_the_provider_remembers_a_key_for_its_window_then_forgets() -> None:
    clock = ManualClock()
    provider = FakeProvider(clock=clock)
    first = provider.send("k", {"amount": 1})
    clock.advance(hours=23)
    assert provider.send("k", {"amount": 1}) == first  # replayed, no new effect
    with pytest.raises(ProviderRejectedError, match="another payload"):
        provider.send("k", {"amount": 2})
    assert (provider.requests, provider.effects) == (3, 1)
    clock.advance(hours=1)
    assert provider.send("k", {"amount": 1}) != first  # forgotten: applied again
    assert (provider.effects_for("k"), provider.lookup("k")) == (2, first)


def test_x3_the_provider_misbehaves_on_request() -> None:
    provider = FakeProvider(lookup=False)
    assert provider.contract.supports_lookup is False
    provider.fail_next("accept_then_timeout")
    provider.fail_next("timeout")
    provider.fail_next("reject")
    with pytest.raises(TimeoutError, match="applied"):
        provider.send("a", {})
    with pytest.raises(TimeoutError, match="before"):
        provider.send("b", {})
    with pytest.raises(ProviderRejectedError):
        provider.send("c", {})
    assert (provider.requests, provider.effects, provider.keys()) == (2, 1, ["a"])
    assert provider.lookup("a") is None  # no lookup
    provider.supports_lookup = True
    assert provider.contract.supports_lookup is True
    assert provider.lookup("a") is not None
    with pytest.raises(ConfigurationError, match="accept_then_timeout"):
        provider.fail_next("explode")
    with pytest.raises(ConfigurationError, match="idempotency_window"):
        FakeProvider(window=dt.timedelta(0))
