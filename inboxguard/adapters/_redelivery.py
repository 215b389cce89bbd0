"""How the kombu and aio-pika consumers settle a delivery (no framework imported).

Neither library has a retry policy of its own, so these consumers retry by
republishing: a failed attempt publishes a copy carrying the next attempt
number and a not-before time, then acks the original. :class:`Redelivery`
holds that policy and :meth:`Attempt.settle` turns one attempt's result into
a :class:`Step`; each consumer only performs the step, synchronously
(kombu) or awaited (aio-pika).
"""

from __future__ import annotations

import datetime as dt
import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inboxguard.adapters._delivery import (
    attempt_of,
    check_retry_policy,
    retry_headers,
    seconds_until_due,
)
from inboxguard.adapters._outcome import (
    Disposition,
    Outcome,
    log_refusal,
    log_requeued,
    out_of_attempts,
    outcome_of,
)

__all__ = ["Attempt", "Redelivery", "Step", "step_of"]


class Step(enum.Enum):
    """What a consumer does with the message after one attempt."""

    #: Committed (or a duplicate): ack.
    ACK = "ack"
    #: Refused: reject without requeue (the broker dead-letters it).
    REJECT = "reject"
    #: Publish the copy for the next attempt, then ack the original.
    RETRY = "retry"
    #: The last attempt failed: quarantine as ``retries_exhausted``, then reject.
    GIVE_UP = "give_up"
    #: No quarantine record holds a refused or exhausted delivery (the write
    #: failed): publish a copy with the same attempt number, due after the
    #: retry delay, then ack the original. Never dropped, never acked alone.
    REQUEUE = "requeue"


def step_of(outcome: Outcome, *, failure: Step = Step.RETRY) -> Step:
    """The step an attempt's outcome settles to.

    In order: back to the broker when no quarantine record holds a refused
    or exhausted delivery (``REQUEUE``); a refusal is rejected; an exhausted
    retry gives up; an outcome handed to the framework's own failure path is
    ``failure`` (a consumer that retries every failure never gets one); any
    other is retried.
    """
    if outcome.requeued:
        return Step.REQUEUE
    if outcome.refused:
        return Step.REJECT
    if outcome.exhausted:
        return Step.GIVE_UP
    if outcome.failed:
        return failure
    return Step.RETRY


@dataclass(frozen=True, slots=True)
class Redelivery:
    """A consumer's retry policy: ``max_attempts`` deliveries, ``delay`` apart."""

    max_attempts: int
    delay: float
    logger: logging.Logger

    @classmethod
    def checked(
        cls, max_attempts: int, retry_delay: dt.timedelta, logger: logging.Logger
    ) -> Redelivery:
        """The policy, once its settings are valid (raises ConfigurationError)."""
        return cls(max_attempts, check_retry_policy(max_attempts, retry_delay), logger)

    def receive(self, headers: Mapping[str, Any] | None, consumer: str) -> Attempt:
        """The attempt a delivery with these headers is, for ``consumer`` (the
        name the adapter was configured with, which its log lines give)."""
        return Attempt(self, dict(headers or {}), consumer)


class Attempt:
    """One delivery of a message: its number, its wait, and how it settles."""

    __slots__ = ("consumer", "headers", "number", "policy")

    def __init__(self, policy: Redelivery, headers: dict[str, Any], consumer: str) -> None:
        self.policy = policy
        self.headers = headers
        self.number = attempt_of(headers)
        self.consumer = consumer

    @property
    def wait(self) -> float:
        """Seconds a retried copy still waits before it is processed."""
        return seconds_until_due(self.headers, self.policy.delay)

    def next_headers(self) -> dict[str, Any]:
        """Headers of the copy published for the next attempt."""
        return retry_headers(self.headers, self.number, self.policy.delay)

    def requeue_headers(self) -> dict[str, Any]:
        """Headers of a copy of this same attempt, due after the retry delay."""
        return retry_headers(self.headers, self.number - 1, self.policy.delay)

    def copy_headers(self, step: Step) -> dict[str, Any]:
        """Headers of the copy a ``RETRY`` (the next attempt) or a ``REQUEUE``
        (this same attempt again) publishes."""
        return self.next_headers() if step is Step.RETRY else self.requeue_headers()

    def judge(self, error: Exception) -> Outcome:
        """The outcome of this attempt ending with ``error`` (a handler's
        exception is retried like a transient one: these consumers have no
        failure path of their own; an inboxguard error that declares a
        failure is refused, never retried)."""
        policy = self.policy
        return outcome_of(
            error,
            last_attempt=lambda: out_of_attempts(self.number, policy.max_attempts),
            retry_failures=True,
        )

    @staticmethod
    def unusable() -> Outcome:
        """The outcome of a delivery with no usable command ID, payload or sent
        time: refused (once its quarantine record is written)."""
        return Outcome(Disposition.REFUSE)

    def settle(self, outcome: Outcome, error: Exception, command_id: str, delivery: Any) -> Step:
        """The step after an attempt that ended with ``error``.

        ``outcome`` has been through ``Outcome.recorded`` when it needed a
        quarantine record; ``delivery`` is logged with a refusal the inbox did
        not quarantine.
        """
        policy = self.policy
        step = step_of(outcome)
        if step is Step.REQUEUE:
            log_requeued(policy.logger, error, f"delivery of {command_id}")
        elif step is Step.REJECT:
            log_refusal(
                policy.logger,
                error,
                delivery,
                consumer=self.consumer,
                command_id=command_id,
                done="quarantined, then rejected without requeue (dead-lettered)",
            )
        elif step is Step.GIVE_UP:
            policy.logger.error(
                "giving up on %s after its last attempt failed: %r", command_id, error
            )
        else:
            policy.logger.warning(
                "attempt %d/%d of %s failed (%r); retrying in %.1fs",
                self.number,
                policy.max_attempts,
                command_id,
                error,
                policy.delay,
            )
        return step
