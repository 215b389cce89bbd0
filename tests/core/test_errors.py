"""Errors survive a trip through pickle (worker pools send them across processes)."""

from __future__ import annotations

import inspect
import pickle

import inboxguard
from inboxguard import errors


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
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert inspect.isclass(cls)
        assert issubclass(cls, inboxguard.InboxGuardError)
        assert cls.__doc__
        assert getattr(inboxguard, name) is cls


def test_error_messages_point_at_their_documentation() -> None:
    """str() ends with the docs anchor of the error's code."""
    err = inboxguard.InProgressError("busy", consumer="c", command_id="x")
    assert str(err).endswith("(see docs/errors.md#in-progress)")
    assert pickle.loads(pickle.dumps(err)).retryable
