"""How the kombu and aio-pika consumers settle a delivery (no framework imported).

Neither library has a retry policy of its own, so these consumers retry by
republishing: a failed attempt publishes a copy carrying the next attempt
number and a not-before time, then acks the original. :class:`Redelivery`
holds that policy and :class:`Attempt` one delivery's number, wait, copy
headers and log line; the delivery script (:mod:`._script`) decides the
:class:`Step` and each consumer only performs it, synchronously (kombu) or
awaited (aio-pika, Kafka). :class:`Step` lives in :mod:`._script` and is importable here.
"""

from __future__ import annotations

import datetime as dt
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
    log_refusal,
    log_requeued,
    out_of_attempts,
)
from inboxguard.adapters._script import Rules, Step, step_of
from inboxguard.adapters._sent_time import SentTimeCheck

__all__ = ["Attempt", "Redelivery", "Step", "step_of"]


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

    @staticmethod
    def rules(sent_time: SentTimeCheck) -> Rules:
        """The delivery script's rules of these consumers: a handler's failure
        is retried (there is no failure path to hand it to), and a delivery
        that cannot be read is refused (once its quarantine record is written)."""
        return Rules(sent_time, retry_failures=True, refuse_unreadable=True)

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

    def last_attempt(self, error: Exception) -> bool:
        """Whether this is the last attempt allowed (a :class:`~._script.Reading`'s
        ``last_attempt``: the error does not change it)."""
        return out_of_attempts(self.number, self.policy.max_attempts)

    def report(
        self, step: Step, error: BaseException, command_id: str | None, delivery: Any
    ) -> None:
        """Log the step a failed attempt settles with (one line per step)."""
        policy = self.policy
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
        elif step is Step.RETRY:
            policy.logger.warning(
                "attempt %d/%d of %s failed (%r); retrying in %.1fs",
                self.number,
                policy.max_attempts,
                command_id,
                error,
                policy.delay,
            )
