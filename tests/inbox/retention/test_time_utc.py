"""Time arithmetic is done in UTC, whatever zone the clock or sent_at is in.

Europe/Berlin moves its clocks forward on 2026-03-29: 30 wall-clock days
from 2026-03-15 12:00 are 29 days 23 hours of real time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard._core.clock import checked_now
from tests.conftest import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")
HORIZON = dt.timedelta(days=30)


@pytest.fixture
def berlin() -> FakeClock:
    """A clock reading Berlin wall time, two weeks before the March change."""
    return FakeClock(dt.datetime(2026, 3, 15, 12, 0, tzinfo=BERLIN))


@pytest.fixture
def box(engine: Engine, prefix: str, berlin: FakeClock) -> Iterator[inboxguard.Inbox]:
    """An inbox keeping evidence 30 days (no margin) on the Berlin clock."""
    policy = inboxguard.RetentionPolicy(replay=HORIZON, margin=dt.timedelta(0))
    inbox = inboxguard.Inbox(engine, retention=policy, table_prefix=prefix, clock=berlin)
    inbox.create_schema()
    yield inbox
    inbox.drop_schema()


def claim(inbox: inboxguard.Inbox, command_id: str, sent_at: dt.datetime | None = None) -> bool:
    """Guard one delivery; return whether it ran as fresh."""
    with (
        inbox.engine.begin() as conn,
        inbox.guard(
            conn, consumer="c", command_id=command_id, payload={"n": 1}, sent_at=sent_at
        ) as entry,
    ):
        return not entry.duplicate


def test_expiry_and_purge_keep_the_full_horizon_across_dst(
    box: inboxguard.Inbox, berlin: FakeClock
) -> None:
    """expires_at is processed_at + 30 days of real time, and a purge 30 minutes
    before that keeps the row (it used to delete it an hour early)."""
    assert claim(box, "inv-1")
    record = box.lookup("c", "inv-1")
    assert record is not None
    assert record.expires_at - record.processed_at == HORIZON
    almost = berlin.now.astimezone(dt.UTC) + HORIZON - dt.timedelta(minutes=30)
    assert box.purge(now=almost.astimezone(BERLIN)).deleted == 0
    assert box.lookup("c", "inv-1") is not None
    assert box.purge(now=(almost + dt.timedelta(hours=1)).astimezone(BERLIN)).deleted == 1


def test_a_message_sent_inside_the_horizon_across_dst_is_accepted(
    box: inboxguard.Inbox, berlin: FakeClock
) -> None:
    """Sent 29 days 23.5 hours ago (real time), in Berlin time: processed."""
    berlin.now = dt.datetime(2026, 4, 10, 12, 0, tzinfo=BERLIN)
    sent_at = (berlin.now.astimezone(dt.UTC) - HORIZON + dt.timedelta(minutes=30)).astimezone(
        BERLIN
    )
    assert claim(box, "inv-2", sent_at=sent_at)
    assert box.quarantined() == []
    too_old = (berlin.now.astimezone(dt.UTC) - HORIZON - dt.timedelta(minutes=1)).astimezone(BERLIN)
    with pytest.raises(inboxguard.BeyondRetentionError):
        claim(box, "inv-3", sent_at=too_old)


def test_a_sent_at_in_the_future_beyond_the_skew_is_refused_and_quarantined(
    box: inboxguard.Inbox, berlin: FakeClock
) -> None:
    """With no margin, up to a minute ahead is accepted; further ahead the
    producer's clock is wrong, the age cannot be checked: refused, quarantined."""
    now = berlin.now
    assert box.retention.max_clock_skew == dt.timedelta(minutes=1)
    assert claim(box, "ahead-ok", sent_at=now + dt.timedelta(seconds=59))
    with pytest.raises(inboxguard.BeyondRetentionError, match="clock is ahead") as caught:
        claim(box, "ahead-bad", sent_at=now + dt.timedelta(minutes=2))
    assert caught.value.limit == now + dt.timedelta(minutes=1)
    assert box.lookup("c", "ahead-bad") is None
    (record,) = box.quarantined()
    assert (record.command_id, record.reason) == ("ahead-bad", "beyond_retention")


def test_the_skew_allowed_is_the_margin() -> None:
    """The margin absorbs clock skew: a sent_at up to the margin ahead is judged."""
    policy = inboxguard.RetentionPolicy(replay=HORIZON, margin=dt.timedelta(hours=6))
    assert policy.max_clock_skew == dt.timedelta(hours=6)


@pytest.mark.parametrize(
    "windows",
    [
        {"replay": dt.timedelta(days=999_999_999)},
        {"replay": dt.timedelta.max},
        {"replay": dt.timedelta(days=365_000), "margin": dt.timedelta(days=10_000)},
    ],
)
def test_a_horizon_that_overflows_a_datetime_is_refused(windows: dict[str, dt.timedelta]) -> None:
    """Refused when the policy is built, not when the first claim overflows."""
    with pytest.raises(inboxguard.ConfigurationError, match="overflow"):
        inboxguard.RetentionPolicy(**windows)


def test_the_clock_is_read_in_utc() -> None:
    """checked_now hands every caller (inbox, purge, outbox, ledger) UTC."""
    now = checked_now(lambda: dt.datetime(2026, 3, 28, 23, 30, tzinfo=BERLIN))
    assert now.tzinfo is dt.UTC
    assert now + dt.timedelta(days=1) - now == dt.timedelta(days=1)
