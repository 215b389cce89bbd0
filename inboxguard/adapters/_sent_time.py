"""What a consumer does with a delivery that carries no sent time.

Without a sent time the inbox cannot refuse a replay older than its evidence
(the stale-replay guard is skipped). Each consumer logs that once, at
WARNING, naming itself and how to stamp the time; with ``require_sent_at``
it refuses such a delivery instead (quarantined as ``missing_sent_at``, then
dead-lettered like a stale one).

Imports no framework.
"""

from __future__ import annotations

import datetime as dt
import logging

from inboxguard.errors import ConfigurationError, MissingSentTimeError

__all__ = ["MISSING_SENT_AT", "SentTimeCheck"]

#: Quarantine reason of a delivery refused because it has no sent time (the
#: code of :class:`~inboxguard.errors.MissingSentTimeError`).
MISSING_SENT_AT = "missing_sent_at"


class SentTimeCheck:
    """One consumer's rule for deliveries without a sent time.

    ``stamp`` tells the reader how a producer stamps the time (it ends the
    warning and the refusal). ``option`` is the adapter's name for
    ``require_sent_at``.
    """

    __slots__ = ("consumer", "logger", "option", "require", "stamp", "warned")

    def __init__(
        self,
        consumer: str,
        *,
        require: object,
        stamp: str,
        option: str,
        logger: logging.Logger,
    ) -> None:
        if not isinstance(require, bool):
            msg = f"{option} must be True or False, got {require!r}"
            raise ConfigurationError(msg)
        self.consumer = consumer
        self.require = require
        self.stamp = stamp
        self.option = option
        self.logger = logger
        self.warned = False

    def __call__(self, sent_at: dt.datetime | None) -> dt.datetime | None:
        """``sent_at`` when there is one; else None after the first warning.

        Raises:
            MissingSentTimeError: no sent time, and the consumer requires one
                (a refusal, quarantined as :data:`MISSING_SENT_AT`).
        """
        if sent_at is not None:
            return sent_at
        if self.require:
            msg = (
                f"the message has no sent time and consumer {self.consumer!r} requires one"
                f" ({self.option}=True): its age cannot be checked against the evidence;"
                f" {self.stamp}"
            )
            raise MissingSentTimeError(msg)
        if not self.warned:
            self.warned = True
            self.logger.warning(
                "consumer %r received a message with no sent time: replays older than its"
                " evidence cannot be refused (logged once per consumer); %s, or set %s=True"
                " to refuse such messages",
                self.consumer,
                self.stamp,
                self.option,
            )
        return None
