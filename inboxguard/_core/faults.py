"""Fault points: the one place where a test can stop a worker at a named seam.

The library calls :func:`reach` at a few points where a real worker can die
with a different outcome each: after the provider accepted a call and before
the ledger recorded it, after a guarded block's changes and before the
caller's commit, after the commit and before the broker's ack. Nothing
happens there unless a test armed a hook (``inboxguard.testing`` does), so the
cost in production is one module-level ``None`` check per point.

A hook raises a :class:`BaseException` subclass to play a crash (handler code
cannot swallow it with ``except Exception``), or returns to let the worker go
on (a hook may only count the points it sees).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

__all__ = ["FaultPoint", "Hook", "arm", "hook", "reach"]


class FaultPoint(enum.StrEnum):
    """The seams where a worker can be stopped."""

    #: A fresh (not duplicate) command is handed to the guarded block: the
    #: handler's body runs next. Keyed by command ID (a batch reaches it once
    #: per fresh entry, before its block gets the batch).
    HANDLER_RUNS = "handler_runs"
    #: The provider accepted the ledger's call; the ledger has not recorded
    #: it yet. Keyed by effect key.
    PROVIDER_ACCEPTED = "provider_accepted"
    #: The guarded block and the stored result are done; the caller's
    #: transaction has not committed. Keyed by command ID (a batch reaches it
    #: once per fresh entry, after its results are stored).
    BEFORE_COMMIT = "before_commit"
    #: The guarded transaction committed; the broker has not been acked.
    #: Keyed by command ID (or the message's key when it has none).
    BEFORE_ACK = "before_ack"


#: ``hook(point, key)``: raise to crash there, return to go on.
Hook = Callable[[FaultPoint, str], None]

#: The armed hook, or None (the default: every point costs one None check).
hook: Hook | None = None


def arm(new: Hook | None) -> Hook | None:
    """Install ``new`` (None disarms); return the hook it replaces."""
    global hook
    previous, hook = hook, new
    return previous


def reach(point: FaultPoint, key: object) -> None:
    """Call the armed hook at ``point`` for ``key``; nothing when none is armed.

    Call sites in hot paths test ``faults.hook is not None`` first.
    """
    armed = hook
    if armed is not None:
        armed(point, str(key))
