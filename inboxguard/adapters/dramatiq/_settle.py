"""The Dramatiq verbs of a settled delivery: return, raise for Retries, fail.

The delivery script (``adapters/_script.py``) decides the step; these verbs
say it in Dramatiq's terms, as the exception the actor raises (None: it
returns). A retry raises ``dramatiq.Retry`` (its jittered delay); a refusal
raises the error itself, listed in the message's ``throws`` so Retries
fails the message at once (dead-lettered); a failure raises the error for
Retries' own policy; the last failed attempt, once quarantined, raises
``Retry`` for Retries to dead-letter; a delivery no quarantine record holds
raises ``Retry`` with one attempt given back, even past ``max_retries``.
Shared by the sync and the async actor.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from dramatiq import Broker, Retry
from dramatiq.broker import MessageProxy

from inboxguard.adapters._outcome import log_refusal, log_requeued
from inboxguard.adapters._script import Settlement, Step
from inboxguard.adapters.dramatiq._windows import retries_of
from inboxguard.errors import (
    CommandRejectedError,
    InvalidCommandError,
    PayloadEncodingError,
)

__all__ = ["NEVER_RETRIED", "VERBS", "Call"]

logger = logging.getLogger("inboxguard.dramatiq")

#: Errors a redelivery cannot cure (disposition ``refuse``): listed in every
#: guarded actor's ``throws``, so Retries dead-letters the message at once.
NEVER_RETRIED: tuple[type[Exception], ...] = (
    CommandRejectedError,
    InvalidCommandError,
    PayloadEncodingError,
)


class Call:
    """One call of a guarded actor: its message (None for a direct call), and
    the ``Retry`` a retry raises, made once per failed attempt."""

    __slots__ = ("actor_name", "broker", "busy_delay_ms", "message", "retry")

    def __init__(
        self, message: MessageProxy | None, broker: Broker, actor_name: str, busy_delay_ms: int
    ) -> None:
        self.message = message
        self.broker = broker
        self.actor_name = actor_name
        self.busy_delay_ms = busy_delay_ms
        self.retry: Retry | None = None

    def retry_of(self, error: Exception) -> Retry:
        """The ``Retry`` this attempt raises when it is retried."""
        if self.retry is None:
            delay = int(self.busy_delay_ms * random.uniform(1.0, 1.5))  # noqa: S311 - jitter
            self.retry = Retry(str(error), delay=delay)
        return self.retry

    def last_attempt(self, error: Exception) -> bool:
        """Whether Retries will dead-letter this attempt's ``Retry`` instead of
        retrying it (the same reading of the options as
        ``Retries.after_process_message``); never for a direct call."""
        message = self.message
        if message is None:
            return False
        retry = self.retry_of(error)
        try:
            retries = retries_of(self.broker)
            actor_options = self.broker.get_actor(message.actor_name).options
        except Exception:
            return False
        done = int(message.options.get("retries", 0))
        retry_when = actor_options.get("retry_when", retries.retry_when)
        if retry_when is not None:
            return not retry_when(done, retry)
        max_retries = self.max_retries()
        return max_retries is not None and done >= max_retries

    def max_retries(self) -> int | None:
        """The ``max_retries`` Retries applies to the message (its own option,
        else the actor's, else the middleware's), None when unknown or unlimited."""
        message = self.message
        if message is None:
            return None
        try:
            retries = retries_of(self.broker)
            actor_options = self.broker.get_actor(message.actor_name).options
        except Exception:
            return None
        value = message.options.get(
            "max_retries", actor_options.get("max_retries", retries.max_retries)
        )
        return value if isinstance(value, int) else None


#: A verb: the call, its settlement, the details a refusal's log line shows;
#: it returns what the actor raises (None: it returns).
Verb = Callable[[Call, Settlement, Mapping[str, Any]], Exception | None]


def _returned(call: Call, settled: Settlement, shown: Mapping[str, Any]) -> Exception | None:
    return None


def _retried(call: Call, settled: Settlement, shown: Mapping[str, Any]) -> Exception | None:
    return call.retry_of(_error_of(settled))


def _requeued(call: Call, settled: Settlement, shown: Mapping[str, Any]) -> Exception | None:
    error = _error_of(settled)
    log_requeued(logger, error, f"actor {call.actor_name}")
    if call.message is not None:
        _one_more_attempt(call.message, call.max_retries())
    return call.retry_of(error)


def _rejected(call: Call, settled: Settlement, shown: Mapping[str, Any]) -> Exception | None:
    error = _error_of(settled)
    if call.message is not None:
        log_refusal(
            logger,
            error,
            shown,
            consumer=settled.consumer,
            done="quarantined, then failed as a declared error (dead-lettered)",
        )
    _throw_on_message(call.message, error, call.broker)
    return error


def _failed(call: Call, settled: Settlement, shown: Mapping[str, Any]) -> Exception | None:
    return _error_of(settled)


def _given_up(call: Call, settled: Settlement, shown: Mapping[str, Any]) -> Exception | None:
    error = _error_of(settled)
    if call.message is not None:
        logger.error(
            "actor %s: gave up on message %s after its last retry: %r",
            call.actor_name,
            call.message.message_id,
            error,
        )
    return call.retry_of(error)


#: The Dramatiq verbs of each step: return; ``Retry`` for a retry, for the
#: last failed attempt (Retries dead-letters it) and, one attempt given back,
#: for a delivery no record holds; the error itself for a refusal (in
#: ``throws``: dead-lettered at once) and for a failure (Retries' policy).
VERBS: Final[Mapping[Step, Verb]] = {
    Step.ACK: _returned,
    Step.RETRY: _retried,
    Step.REQUEUE: _requeued,
    Step.REJECT: _rejected,
    Step.FAIL: _failed,
    Step.GIVE_UP: _given_up,
}


def _error_of(settled: Settlement) -> Exception:
    assert settled.error is not None  # every step but ACK settles a failed attempt
    return settled.error


def _one_more_attempt(message: MessageProxy, max_retries: int | None) -> None:
    """Let Retries requeue this message even on its last attempt.

    Retries counts the attempts in ``options["retries"]``, so this one is
    not counted. On a first attempt there is nothing to take back: with
    ``max_retries=0`` the message's own ``max_retries`` is raised to 1
    instead (Retries reads the message's option before the actor's), or
    Retries would fail the message without a quarantine record.
    """
    done = int(message.options.get("retries", 0))
    if done > 0:
        message.options["retries"] = done - 1
    elif max_retries is not None and max_retries < 1:
        message.options["max_retries"] = 1


def _throw_on_message(message: MessageProxy | None, error: Exception, broker: Broker) -> None:
    """Make sure Retries dead-letters a refused message.

    An actor's ``throws`` already lists :data:`NEVER_RETRIED`, but a
    ``throws`` in the message's own options replaces the actor's, so extend
    that one too. A declared failure the outcome policy refuses
    (``ReconciliationRequiredError``) is in neither: its type is added.
    """
    if message is None:
        return
    throws = message.options.get("throws")
    if throws is None and isinstance(error, NEVER_RETRIED):
        return
    if throws is None:
        try:
            throws = broker.get_actor(message.actor_name).options.get("throws")
        except Exception:
            throws = None
    current = () if throws is None else throws if isinstance(throws, tuple) else (throws,)
    wanted = (*NEVER_RETRIED, type(error))
    message.options["throws"] = (*current, *(t for t in wanted if t not in current))
