"""The errors of a batch claim that concern the whole batch: a busy
database, rows that vanished, and a transaction ended inside the block."""

from __future__ import annotations

from collections.abc import Sequence

from inboxguard.errors import ConfigurationError, InProgressError
from inboxguard.inbox._flow import SQLALCHEMY_BOUNDARY
from inboxguard.sql.dialects.base.inbox import CLAIM_ATTEMPTS

__all__ = ["boundary_error", "busy_error", "results_vanished", "vanished_error"]


def _named(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(k) for k in keys[:3])
    return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")


def busy_error(consumer: str, keys: Sequence[str]) -> InProgressError:
    msg = (
        f"a batch of consumer {consumer!r} met a lock held by another transaction past"
        f" lock_timeout, a deadlock or a serialization failure while claiming {_named(keys)}:"
        " nothing of the batch was applied; roll back and deliver the batch again later"
        " (the commands the other transaction commits are then duplicates)"
    )
    return InProgressError(msg, consumer=consumer, command_id=keys[0])


def vanished_error(consumer: str, keys: Sequence[str]) -> InProgressError:
    msg = (
        f"the evidence rows of {_named(keys)} of consumer {consumer!r} were deleted between"
        f" the batch claim's insert and its read {CLAIM_ATTEMPTS} times in a row (a purge or"
        " an operator deleting them concurrently); nothing was applied: roll back and"
        " deliver the batch again later"
    )
    return InProgressError(msg, consumer=consumer, command_id=keys[0])


def boundary_error(consumer: str, size: int) -> ConfigurationError:
    advice = SQLALCHEMY_BOUNDARY
    msg = (
        f"the transaction of a batch of {size} commands (consumer {consumer!r}) was"
        f" committed or rolled back inside the guarded block ({advice.causes}): the inbox"
        " rows no longer commit with the block's changes, so commands could be lost or"
        " applied twice. Never commit or roll back inside the block; wrap a step that may"
        f" fail in {advice.savepoint} and let the caller end the transaction after the"
        " block. Roll back now"
    )
    return ConfigurationError(msg)


def results_vanished(consumer: str, expected: int, matched: int) -> ConfigurationError:
    msg = (
        f"storing (or releasing) {expected} entries of a batch of consumer {consumer!r}"
        f" matched {matched} inbox rows: claims were deleted or rolled back inside the"
        " guarded block. Never delete inbox rows or roll back past the claim inside the"
        " block. Roll back now"
    )
    return ConfigurationError(msg)
