"""The policy: horizon, explain, and alignment that fails closed."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import create_engine

import inboxguard
from inboxguard._core.retention import WindowRow

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


def worked_example() -> inboxguard.RetentionPolicy:
    """Celery on Redis: 1 h visibility timeout, 30-day DLQ replay, 60-day disputes."""
    return inboxguard.RetentionPolicy(
        visibility_timeout=HOUR,
        dead_letter_replay=30 * DAY,
        dispute=60 * DAY,
        margin=2 * DAY,
        result_ttl=7 * DAY,
    )


def test_horizon_is_longest_window_plus_margin() -> None:
    policy = worked_example()
    assert policy.horizon == 62 * DAY
    assert policy.max_message_age == 60 * DAY


def test_explain_lists_declared_and_reported_windows_with_their_source() -> None:
    policy = worked_example()
    policy.check("celery: broker_transport_options.visibility_timeout", visibility_timeout=HOUR)
    rows = policy.explain()
    assert rows[0] == WindowRow("dispute", 60 * DAY, "declared")
    assert (
        WindowRow("visibility_timeout", HOUR, "celery: broker_transport_options.visibility_timeout")
        in rows
    )
    assert WindowRow("horizon", 62 * DAY, "longest declared window + margin") in rows
    assert WindowRow("result_ttl", 7 * DAY, "stored results dropped after") in rows


def test_misaligned_window_refuses_to_start_naming_window_length_and_horizon(
    sqlite_url: str,
) -> None:
    engine = create_engine(sqlite_url)
    inbox = inboxguard.Inbox(engine, retention=worked_example())
    with pytest.raises(inboxguard.RetentionMisalignedError) as caught:
        inbox.require_alignment("dramatiq: dead_message_ttl", dead_message_ttl=90 * DAY)
    error = caught.value
    assert isinstance(error, inboxguard.ConfigurationError)
    assert (error.window, error.length, error.horizon) == ("dead_message_ttl", 90 * DAY, 62 * DAY)
    assert "dead_message_ttl" in str(error)
    assert "dramatiq: dead_message_ttl" in str(error)
    assert "90d" in str(error)
    assert "62d" in str(error)
    # the refused window is still listed, so an operator sees what the adapter found
    sources = {(row.window, row.source) for row in inbox.retention.explain()}
    assert ("dead_message_ttl", "dramatiq: dead_message_ttl") in sources
    engine.dispose()


def test_aligned_windows_pass() -> None:
    policy = worked_example()
    policy.check("celery", visibility_timeout=HOUR, retry_schedule=6 * HOUR)


def test_bare_timedelta_is_one_window_without_margin() -> None:
    policy = inboxguard.RetentionPolicy.coerce(30 * DAY)
    assert policy.horizon == 30 * DAY
    with pytest.raises(inboxguard.RetentionMisalignedError):
        policy.check("declared", dlq=31 * DAY)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "at least one replay window"),
        ({"dlq": 30}, "window 'dlq' must be a datetime.timedelta"),
        ({"dlq": DAY, "margin": -DAY}, "margin must be zero or more"),
        ({"dlq": DAY, "result_ttl": 3 * DAY}, "result_ttl 3d is longer than the horizon"),
    ],
)
def test_bad_policy_is_refused_with_the_field_named(kwargs: dict, fragment: str) -> None:
    with pytest.raises(inboxguard.ConfigurationError, match=fragment):
        inboxguard.RetentionPolicy(**kwargs)
