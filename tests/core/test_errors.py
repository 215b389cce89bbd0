"""Errors survive a trip through pickle (worker pools send them across processes)."""

from __future__ import annotations

import inspect
import pickle

import inboxguard
from inboxguard import errors
from inboxguard._core.outcome import Disposition

#: The public error classes (``errors.__all__`` also lists the Disposition enum).
ERROR_NAMES = [n for n in errors.__all__ if n.endswith("Error")]


def test_every_error_pickles_with_its_attributes() -> None:
    """Each error class round-trips through pickle with message and attributes."""
    err = inboxguard.PayloadMismatchError(
        consumer="c", command_id="x", stored_digest="sha256:a", incoming_digest="sha256:b"
    )
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err)
    assert str(back) == str(err)
    assert (back.consumer, back.command_id, back.stored_digest, back.incoming_digest) == (
        "c",
        "x",
        "sha256:a",
        "sha256:b",
    )
    assert [n for n in errors.__all__ if n not in ERROR_NAMES] == ["Disposition"]
    for name in [*ERROR_NAMES, "Disposition"]:
        cls = getattr(errors, name)
        assert inspect.isclass(cls)
        assert cls.__doc__
        assert getattr(inboxguard, name) is cls
    for name in ERROR_NAMES:
        assert issubclass(getattr(errors, name), inboxguard.InboxGuardError)


def test_error_messages_point_at_their_documentation() -> None:
    """str() ends with the docs anchor of the error's code."""
    err = inboxguard.InProgressError("busy", consumer="c", command_id="x")
    assert str(err).endswith("(see docs/errors.md#in-progress)")
    assert pickle.loads(pickle.dumps(err)).retryable


def test_the_three_payload_conflicts_pickle_and_stay_apart() -> None:
    """One error per meaning: only the inbox's conflict promises a quarantine record."""
    digests = {"stored_digest": "sha256:a", "incoming_digest": "sha256:b"}
    raised = [
        inboxguard.PayloadMismatchError(consumer="c", command_id="x", **digests),
        inboxguard.OutboxPayloadConflictError("m", command_id="x", **digests),
        inboxguard.EffectPayloadConflictError("m", effect_key="x", **digests),
    ]
    for err in raised:
        back = pickle.loads(pickle.dumps(err))
        assert isinstance(back, inboxguard.PayloadConflictError)
        assert isinstance(back, inboxguard.CommandRejectedError)
        assert (back.command_id, back.stored_digest, back.incoming_digest) == (
            "x",
            "sha256:a",
            "sha256:b",
        )
        assert str(back).endswith(f"(see docs/errors.md#{type(err).code})")
    mismatch, outbox, effect = raised
    assert (mismatch.quarantined, mismatch.consumer) == (True, "c")
    assert (outbox.quarantined, outbox.consumer) == (False, None)
    assert (effect.quarantined, effect.consumer, effect.effect_key) == (False, None, "x")
    assert isinstance(effect, inboxguard.EffectError)
    assert not isinstance(outbox, inboxguard.PayloadMismatchError)
    assert not isinstance(effect, inboxguard.PayloadMismatchError)
    assert len({type(err).code for err in raised}) == 3


def test_every_error_carries_a_disposition_and_retryable_follows_it() -> None:
    """``retryable`` is derived from the disposition, on every class."""
    for name in ERROR_NAMES:
        cls = getattr(errors, name)
        assert isinstance(cls.disposition, Disposition)
        assert cls.retryable is (cls.disposition is Disposition.RETRY)
    assert inboxguard.CommandRejectedError.disposition is Disposition.REFUSE
    assert inboxguard.InvalidCommandError.disposition is Disposition.REFUSE
    assert inboxguard.PayloadEncodingError.disposition is Disposition.REFUSE
    assert inboxguard.InProgressError.disposition is Disposition.RETRY
    assert inboxguard.ConfigurationError.disposition is Disposition.FAIL
    assert inboxguard.ProviderRejectedError.disposition is Disposition.FAIL


def test_a_subclass_that_sets_only_retryable_gets_the_matching_disposition() -> None:
    """Code written against ``retryable`` keeps working."""

    class Flaky(inboxguard.EffectError):
        """A user's retryable effect error."""

        retryable = True

    class Firm(inboxguard.InProgressError):
        """A user's non-retryable variant."""

        retryable = False

    assert (Flaky.disposition, Flaky.retryable) == (Disposition.RETRY, True)
    assert (Firm.disposition, Firm.retryable) == (Disposition.FAIL, False)
    assert inboxguard.is_retryable(Flaky("x"))
