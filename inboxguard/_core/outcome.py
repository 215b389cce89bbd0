"""What a failed delivery means: refuse it, retry it, or let it fail.

Every error class in :mod:`inboxguard.errors` carries its
:class:`~inboxguard.errors.Disposition`; :func:`classify` maps any exception (inboxguard's or
not) and the delivery's attempt count to an :class:`Outcome`. The adapters
only translate an outcome into their framework's verbs (reject, retry, ack);
they decide nothing themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from inboxguard.errors import Disposition

__all__ = [
    "Disposition",
    "Outcome",
    "classify",
    "declares_disposition",
    "disposition_of",
    "out_of_attempts",
]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The settled meaning of one failed delivery.

    ``exhausted`` is true when the delivery must be retried but has no attempt
    left: the adapter quarantines it as ``retries_exhausted`` and dead-letters it.
    ``unrecorded`` is true when a refusal or an exhausted delivery has no
    quarantine record (the write failed): it is not settled, so it goes back
    to the broker instead of being acked or dead-lettered (:meth:`recorded`).
    """

    disposition: Disposition
    exhausted: bool = False
    unrecorded: bool = False

    @property
    def needs_record(self) -> bool:
        """A quarantine record must hold the delivery before it is dead-lettered
        (and none was found missing yet)."""
        refused_or_spent = self.disposition is Disposition.REFUSE or self.exhausted
        return refused_or_spent and not self.unrecorded

    def recorded(self, written: bool) -> Outcome:
        """This outcome once the quarantine write said ``written`` (an outcome
        already unrecorded stays so)."""
        return replace(self, unrecorded=self.unrecorded or (self.needs_record and not written))

    @property
    def requeued(self) -> bool:
        """Back to the broker, never acked: its quarantine record is missing."""
        return self.unrecorded

    @property
    def refused(self) -> bool:
        """Dead-letter now, without a retry (its quarantine record is written)."""
        return self.disposition is Disposition.REFUSE and not self.unrecorded

    @property
    def retried(self) -> bool:
        """Deliver again later (an attempt is left)."""
        return self.disposition is Disposition.RETRY and not self.exhausted

    @property
    def failed(self) -> bool:
        """Hand the error to the framework's own failure path."""
        return self.disposition is Disposition.FAIL


def disposition_of(
    error: BaseException, *, is_transient: Callable[[BaseException], bool] = lambda _: False
) -> Disposition:
    """The disposition an error carries; ``is_transient`` judges the rest.

    An inboxguard error answers for itself (its ``disposition`` class
    attribute). Any other exception is :attr:`Disposition.RETRY` when
    ``is_transient`` says so (a lock timeout, a lost connection), else
    :attr:`Disposition.FAIL`.
    """
    own = getattr(type(error), "disposition", None)
    if isinstance(own, Disposition):
        return own
    return Disposition.RETRY if is_transient(error) else Disposition.FAIL


def declares_disposition(error: BaseException) -> bool:
    """Whether ``error`` carries its own disposition (an inboxguard error does;
    a handler's foreign exception does not)."""
    return isinstance(getattr(type(error), "disposition", None), Disposition)


def classify(
    error: BaseException,
    *,
    is_transient: Callable[[BaseException], bool] = lambda _: False,
    last_attempt: Callable[[], bool] = lambda: False,
    retry_failures: bool = False,
    failure_path_retries: bool = False,
) -> Outcome:
    """The outcome of a delivery that raised ``error``.

    ``last_attempt`` says whether the framework would deliver the message
    again (asked only for a retry).

    A :attr:`Disposition.FAIL` is never retried when the error declares it
    (an inboxguard error such as ``ReconciliationRequiredError``: retrying
    cannot fix it, and each futile attempt would touch the evidence again).
    Where the consumer would retry a failure anyway, that declared failure is
    a :attr:`Disposition.REFUSE` instead: quarantined under its error code,
    then dead-lettered. Two kinds of consumer would retry it:

    * ``retry_failures``: consumers with no failure path of their own (kombu,
      aio-pika) retry a foreign failure (the handler's own exception) like a
      :attr:`Disposition.RETRY`, and quarantine it when exhausted;
    * ``failure_path_retries``: consumers whose framework's failure path
      retries (Dramatiq's Retries middleware) hand it a foreign failure.

    Elsewhere (Celery, whose failure path marks the task failed and does not
    retry it) a failure of either kind goes to the framework's failure path.
    """
    disposition = disposition_of(error, is_transient=is_transient)
    if disposition is Disposition.FAIL:
        if declares_disposition(error) and (retry_failures or failure_path_retries):
            return Outcome(Disposition.REFUSE)
        if retry_failures:
            disposition = Disposition.RETRY
    if disposition is Disposition.RETRY:
        return Outcome(disposition, exhausted=last_attempt())
    return Outcome(disposition)


def out_of_attempts(attempt: int, max_attempts: int | None) -> bool:
    """Whether attempt number ``attempt`` (the first is 1) is the last one allowed."""
    return max_attempts is not None and attempt >= max_attempts
