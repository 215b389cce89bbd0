"""One outcome policy: what a failed delivery becomes, for every adapter."""

from __future__ import annotations

import pytest

import inboxguard
from inboxguard._core import headers
from inboxguard._core.outcome import (
    Disposition,
    Outcome,
    classify,
    declares_disposition,
    out_of_attempts,
)


def _busy() -> inboxguard.InProgressError:
    return inboxguard.InProgressError("busy", consumer="c", command_id="x")


def _mismatch() -> inboxguard.PayloadMismatchError:
    return inboxguard.PayloadMismatchError(
        consumer="c", command_id="x", stored_digest="a", incoming_digest="b"
    )


def test_a_refusal_is_refused_on_every_attempt() -> None:
    for error in (_mismatch(), inboxguard.InvalidCommandError("no id")):
        outcome = classify(error, last_attempt=lambda: pytest.fail("not asked"))
        assert outcome == Outcome(Disposition.REFUSE)
        assert outcome.refused
        assert not outcome.retried


def test_a_retry_is_retried_until_the_last_attempt_then_exhausted() -> None:
    assert classify(_busy(), last_attempt=lambda: False).retried
    outcome = classify(_busy(), last_attempt=lambda: True)
    assert (outcome.disposition, outcome.exhausted, outcome.retried) == (
        Disposition.RETRY,
        True,
        False,
    )


def test_a_foreign_error_is_judged_by_the_injected_predicate() -> None:
    transient = classify(OSError("lost"), is_transient=lambda e: isinstance(e, OSError))
    assert transient.retried
    assert classify(ValueError("bug"), is_transient=lambda e: False).failed


def test_a_foreign_failure_is_retried_only_where_the_framework_has_no_failure_path() -> None:
    assert classify(ValueError("bug")).failed
    bug = ValueError("the handler's own bug")
    assert classify(bug, retry_failures=True, last_attempt=lambda: False).retried
    assert classify(bug, retry_failures=True, last_attempt=lambda: True).exhausted
    # Dramatiq's failure path retries a foreign failure itself: handed over.
    assert classify(bug, failure_path_retries=True).failed
    # A refusal is never turned into a retry.
    assert classify(_mismatch(), retry_failures=True).refused


def test_a_declared_failure_is_never_retried() -> None:
    """Changed by issue 19: an inboxguard error that declares FAIL
    (``ReconciliationRequiredError``, ``ConfigurationError``) was retried like a
    retry where the consumer has no failure path; it is now refused
    (quarantined, dead-lettered) there and where the failure path retries."""
    unknown = inboxguard.ReconciliationRequiredError("operator needed", effect_key="k")
    config = inboxguard.ConfigurationError("bad setup")
    for error in (unknown, config):
        assert declares_disposition(error)
        assert classify(error, retry_failures=True, last_attempt=lambda: False).refused
        assert classify(error, failure_path_retries=True).refused
        assert classify(error).failed  # Celery: its failure path does not retry
    assert not declares_disposition(ValueError("bug"))


def test_out_of_attempts_counts_from_one() -> None:
    assert not out_of_attempts(1, 2)
    assert out_of_attempts(2, 2)
    assert not out_of_attempts(99, None)


def test_one_sent_at_header() -> None:
    assert headers.SENT_AT == "x-inbox-sent-at"
    assert headers.sent_at_of({headers.SENT_AT: "t0"}) == "t0"
    assert headers.sent_at_of({"x-inboxguard-sent-at": "t0"}) is None
    assert headers.sent_at_of(None) is None
    assert inboxguard.outbox.HEADER_SENT_AT == headers.SENT_AT
