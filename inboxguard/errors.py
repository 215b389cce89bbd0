"""Every exception inboxguard raises, in one tree.

Each class says what happened and what to do about it, carries a stable
``code`` (the anchor of its entry in ``docs/errors.md``) and a
``disposition`` (see :class:`Disposition`), so that
adapters choose between "refuse", "retry later" and "let it fail" without a
table of their own; ``retryable`` is true exactly when the disposition is
``retry``::

    InboxGuardError                      base; never raised directly      fail
    ├── ConfigurationError               setup misuse, detected early     fail
    │   ├── UnsupportedDialectError      the engine's database is not supported
    │   └── RetentionMisalignedError     a replay window outlives the evidence
    ├── InvalidCommandError (ValueError) empty, too long or non-printable ID
    │   │                                                                 refuse
    │   └── MissingSentTimeError         no sent time, and one is required
    ├── PayloadEncodingError (TypeError) the payload has no canonical encoding
    │                                                                     refuse
    ├── NoActiveGuardError (LookupError) current_session() outside a guard fail
    ├── CommandRejectedError             the message must not be processed,
    │   │                                now or on a retry: dead-letter it refuse
    │   ├── PayloadConflictError         same ID, different payload digest
    │   │   ├── PayloadMismatchError     the inbox's: quarantined
    │   │   ├── OutboxPayloadConflictError  Outbox.add: nothing written
    │   │   └── EffectPayloadConflictError  the ledger's (also an EffectError):
    │   │                                   nothing sent
    │   └── BeyondRetentionError         older than the evidence horizon:
    │                                    quarantined
    ├── InProgressError                  another transaction holds the claim
    │                                                                     retry
    ├── UnroutableMessageError           the broker returned an outbox message
    │                                    (no queue bound to it)           retry
    └── EffectError                      the external-effect ledger       fail
        ├── InvalidTransitionError       a transition the state machine forbids
        ├── StaleLeaseError              a fenced-out worker tried to record
        │                                (the new holder decides)         retry
        ├── EffectOutcomeUnknownError    the provider may or may not have acted,
        │                                or another worker is acting      retry
        ├── ReconciliationRequiredError  no safe automatic path is left
        ├── ProviderRejectedError        the provider definitely refused
        └── ReceiptTooLargeError         applied and recorded, but the receipt's
                                         details are too large to store

``quarantined`` is true on the errors whose raising wrote a quarantine record
(the inbox's :class:`PayloadMismatchError` and :class:`BeyondRetentionError`).

Control flow is not an error: a duplicate is an outcome
(:attr:`inboxguard.InboxEntry.duplicate`), never an exception.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

__all__ = [
    "BeyondRetentionError",
    "CommandRejectedError",
    "ConfigurationError",
    "Disposition",
    "EffectError",
    "EffectOutcomeUnknownError",
    "EffectPayloadConflictError",
    "InProgressError",
    "InboxGuardError",
    "InvalidCommandError",
    "InvalidTransitionError",
    "MissingSentTimeError",
    "NoActiveGuardError",
    "OutboxPayloadConflictError",
    "PayloadConflictError",
    "PayloadEncodingError",
    "PayloadMismatchError",
    "ProviderRejectedError",
    "ReceiptTooLargeError",
    "ReconciliationRequiredError",
    "RetentionMisalignedError",
    "StaleLeaseError",
    "UnroutableMessageError",
    "UnsupportedDialectError",
]


class Disposition(enum.Enum):
    """What a delivery that raised an error must become."""

    #: The message must never run again, whatever the attempt: it is (or
    #: already was, by the inbox) quarantined, then dead-lettered, without
    #: requeue. Mismatched payloads, messages beyond retention, unusable
    #: command IDs or payloads.
    REFUSE = "refuse"
    #: Delivering the same message again later may succeed (a busy claim, a
    #: transient database error, an ambiguous effect): deliver it again with
    #: backoff; once the retries are exhausted, quarantine it as
    #: ``retries_exhausted``, then dead-letter it.
    RETRY = "retry"
    #: A defect or a misconfiguration that retrying by itself cannot fix, or an
    #: error inboxguard cannot judge (one the handler raised). inboxguard does
    #: not retry it: each adapter hands it to its framework's own failure path
    #: (Celery fails the task; Dramatiq's Retries middleware applies the
    #: actor's policy; the kombu and aio-pika consumers, which have no failure
    #: path of their own, retry it like :attr:`RETRY`).
    FAIL = "fail"


#: Where each error is explained, relative to the project root (and the docs site).
_DOCS = "docs/errors.md#"


class InboxGuardError(Exception):
    """Base of every inboxguard error; catch it to catch them all."""

    #: Stable identifier of the error, also its anchor in ``docs/errors.md``.
    code: ClassVar[str] = "inboxguard-error"
    #: What a delivery that raised it must become (refuse, retry or fail).
    disposition: ClassVar[Disposition] = Disposition.FAIL
    #: True when the same message may succeed if it is delivered again later;
    #: derived from ``disposition`` (a subclass that sets only ``retryable``
    #: gets the matching disposition).
    retryable: ClassVar[bool] = False
    #: True when raising it wrote a quarantine record of the delivery.
    quarantined: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Keep ``retryable`` and ``disposition`` in step on every subclass."""
        super().__init_subclass__(**kwargs)
        if "disposition" not in cls.__dict__ and "retryable" in cls.__dict__:
            cls.disposition = Disposition.RETRY if cls.retryable else Disposition.FAIL
        cls.retryable = cls.disposition is Disposition.RETRY

    def __str__(self) -> str:
        """Return the message followed by a pointer to its documentation."""
        return f"{super().__str__()} (see {_DOCS}{self.code})"

    def __reduce__(self) -> tuple[object, ...]:
        """Pickle by state, not by constructor: many errors take keyword-only
        arguments, and worker pools (Celery prefork, multiprocessing) pickle
        exceptions across processes."""
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(
    cls: type[InboxGuardError], args: tuple[object, ...], state: dict[str, object]
) -> InboxGuardError:
    """Recreate a pickled error without calling its ``__init__``."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ConfigurationError(InboxGuardError):
    """The library is set up in a way that cannot keep its guarantees.

    Raised at construction or start-up, before any message is consumed.
    """

    code = "configuration"


class UnsupportedDialectError(ConfigurationError):
    """The engine's database has no inboxguard dialect (PostgreSQL, MariaDB/MySQL
    and SQLite are supported)."""

    code = "unsupported-dialect"


class RetentionMisalignedError(ConfigurationError):
    """A declared replay window is longer than the inbox's evidence horizon.

    A message replayed inside that window could find its evidence purged and be
    processed again, so the consumer refuses to start.
    """

    code = "retention-misaligned"

    def __init__(self, message: str, *, window: str, length: object, horizon: object) -> None:
        super().__init__(message)
        self.window = window
        self.length = length
        self.horizon = horizon


class InvalidCommandError(InboxGuardError, ValueError):
    """A command ID or consumer name is not a usable identity.

    It is empty, not a string, longer than 255 characters, or contains control
    characters or surrounding whitespace. Nothing was written. A missing ID is
    never treated as "skip deduplication".
    """

    code = "invalid-command"
    disposition = Disposition.REFUSE


class MissingSentTimeError(InvalidCommandError):
    """A consumer that requires a sent time (``require_sent_at=True``,
    ``inbox_require_sent_at``) received a message without one: its age cannot
    be checked against the evidence, so it is refused. Nothing was applied;
    the adapters quarantine it as ``missing_sent_at`` and dead-letter it.
    """

    code = "missing-sent-at"


class PayloadEncodingError(InboxGuardError, TypeError):
    """A payload (or a result) has no canonical JSON encoding.

    ``path`` names the offending value, e.g. ``payload["items"][3]["price"]``.
    Nothing was written.
    """

    code = "payload-encoding"
    disposition = Disposition.REFUSE

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class NoActiveGuardError(InboxGuardError, LookupError):
    """``current_session()`` was called outside a running inbox guard."""

    code = "no-active-guard"


class CommandRejectedError(InboxGuardError):
    """The incoming message must not be processed, now or on a retry.

    Roll back the caller's transaction and dead-letter the message; never
    retry it. When the inbox raised it (``quarantined`` is true), a quarantine
    record has been written in its own transaction first. ``consumer`` is the
    consumer the inbox filed the record under, None when no inbox was involved.
    """

    code = "command-rejected"
    disposition = Disposition.REFUSE

    def __init__(self, message: str, *, consumer: str | None, command_id: str) -> None:
        super().__init__(message)
        self.consumer = consumer
        self.command_id = command_id


class PayloadConflictError(CommandRejectedError):
    """A command ID (or effect key) is already stored with another payload digest.

    An integrity error (a reused ID generator, or a command mutated between
    retries), so inboxguard fails closed. Catch this class to handle every
    payload conflict; its subclasses say where it was found and what was
    written: :class:`PayloadMismatchError` (the inbox, quarantined),
    :class:`OutboxPayloadConflictError` and :class:`EffectPayloadConflictError`
    (nothing written or sent, nothing quarantined).
    """

    code = "payload-conflict"

    def __init__(
        self,
        message: str,
        *,
        command_id: str,
        stored_digest: str,
        incoming_digest: str,
        consumer: str | None = None,
    ) -> None:
        super().__init__(message, consumer=consumer, command_id=command_id)
        self.stored_digest = stored_digest
        self.incoming_digest = incoming_digest


class PayloadMismatchError(PayloadConflictError):
    """The inbox holds this command ID with a different payload digest.

    The guard fails closed: the block does not run, the stored result is not
    returned, and the delivery is quarantined (``payload_mismatch``) under
    ``consumer`` before this is raised. Only the inbox raises it.
    """

    code = "payload-mismatch"
    quarantined = True
    consumer: str

    def __init__(
        self,
        *,
        consumer: str,
        command_id: str,
        stored_digest: str,
        incoming_digest: str,
        message: str | None = None,
    ) -> None:
        super().__init__(
            message
            or f"command {command_id!r} of consumer {consumer!r} was already processed"
            f" with payload {stored_digest}, but this delivery carries"
            f" {incoming_digest}; it was quarantined and is never retried (an adapter"
            " dead-letters it; a caller of guard() rolls back); `inboxguard explain`"
            " shows both digests",
            consumer=consumer,
            command_id=command_id,
            stored_digest=stored_digest,
            incoming_digest=incoming_digest,
        )


class OutboxPayloadConflictError(PayloadConflictError):
    """``Outbox.add`` was given a command ID the outbox holds with another payload.

    Two different commands under one ID; nothing was written and nothing was
    quarantined (``consumer`` is None). Roll back and find out why the same
    business intent produced a different command.
    """

    code = "outbox-payload-conflict"


class BeyondRetentionError(CommandRejectedError):
    """The message is older than the evidence horizon.

    Its deduplication evidence may already be purged, so it can be told neither
    new nor duplicate; it is refused and quarantined, never processed as new.
    """

    code = "beyond-retention"
    quarantined = True
    consumer: str

    def __init__(
        self, message: str, *, consumer: str, command_id: str, sent_at: object, limit: object
    ) -> None:
        super().__init__(message, consumer=consumer, command_id=command_id)
        self.sent_at = sent_at
        self.limit = limit


class InProgressError(InboxGuardError):
    """Another transaction holds the claim on this command, or the database
    reported a lock timeout, deadlock or serialization failure.

    Nothing was applied by this transaction. Roll back and deliver the message
    again later: it will then be a duplicate, or new if the other attempt
    rolled back.
    """

    code = "in-progress"
    disposition = Disposition.RETRY

    def __init__(self, message: str, *, consumer: str, command_id: str) -> None:
        super().__init__(message)
        self.consumer = consumer
        self.command_id = command_id


class UnroutableMessageError(InboxGuardError):
    """The broker returned a message an outbox transport published: no queue is
    bound to its ``destination`` (a misspelt destination, or a queue nobody
    declared yet).

    The row is not delivered: the dispatcher retries it with backoff and marks
    it dead after ``max_attempts``. Declare the queue or fix the destination.
    """

    code = "unroutable"
    disposition = Disposition.RETRY

    def __init__(self, message: str, *, destination: str) -> None:
        super().__init__(message)
        self.destination = destination


class EffectError(InboxGuardError):
    """Base of the external-effect ledger's errors.

    ``effect_key`` names the effect when the ledger raised the error (it is
    ``None`` when a provider raised it).
    """

    code = "effect"

    def __init__(self, message: str, *, effect_key: str | None = None) -> None:
        super().__init__(message)
        self.effect_key = effect_key


class InvalidTransitionError(EffectError):
    """The effect ledger was asked for a state change its state machine forbids.

    ``from_state`` and ``to_state`` are the state names (``None`` for "no
    record yet"). Nothing was written.
    """

    code = "invalid-transition"

    def __init__(
        self,
        message: str,
        *,
        from_state: str | None,
        to_state: str,
        effect_key: str | None = None,
    ) -> None:
        super().__init__(message, effect_key=effect_key)
        self.from_state = from_state
        self.to_state = to_state


class StaleLeaseError(EffectError):
    """A worker whose lease was taken over tried to record an outcome.

    The fencing token it holds (``token``) is older than the current one
    (``current_token``), so its write was refused: the worker that took the
    lease over decides the outcome, through a lookup or a re-send with the same
    idempotency key. Retryable: delivering the task again returns that
    outcome.
    """

    code = "stale-lease"
    disposition = Disposition.RETRY

    def __init__(
        self, message: str, *, effect_key: str, token: int, current_token: int | None
    ) -> None:
        super().__init__(message, effect_key=effect_key)
        self.token = token
        self.current_token = current_token


class EffectOutcomeUnknownError(EffectError):
    """The provider call ended ambiguously (timeout, dropped connection), or
    another worker holds the effect's lease right now.

    The effect is recorded as unknown (or is still being executed); retrying
    looks it up (or re-sends with the same idempotency key inside the
    provider's window) before acting again. ``state`` is the state the effect
    was left in.
    """

    code = "effect-outcome-unknown"
    disposition = Disposition.RETRY

    def __init__(self, message: str, *, effect_key: str, state: str) -> None:
        super().__init__(message, effect_key=effect_key)
        self.state = state


class ReconciliationRequiredError(EffectError):
    """The effect's outcome is unknown and no safe automatic path remains (the
    provider's idempotency window has passed and a lookup, if any, found
    nothing); nothing was sent and an operator must reconcile it.

    The effect stays ``unknown``; ``window_ends_at`` is when the provider's
    idempotency window closed (``None`` when unknown).
    """

    code = "reconciliation-required"

    def __init__(self, message: str, *, effect_key: str, window_ends_at: object = None) -> None:
        super().__init__(message, effect_key=effect_key)
        self.window_ends_at = window_ends_at


class ProviderRejectedError(EffectError):
    """The provider definitely refused the effect; nothing happened there.

    Providers raise it from ``send`` for a definite refusal (a declined card,
    a validation error); the ledger records ``rejected`` and re-raises it, and
    raises it again, without calling the provider, for every later attempt
    with the same key. ``reason`` is a short machine-readable cause, when known.
    """

    code = "provider-rejected"

    def __init__(
        self, message: str, *, reason: str | None = None, effect_key: str | None = None
    ) -> None:
        super().__init__(message, effect_key=effect_key)
        self.reason = reason


class ReceiptTooLargeError(EffectError):
    """The provider applied the effect, but the receipt's details are too large
    for the ledger to store (over ``MAX_RECEIPT_DETAILS`` characters once
    encoded; MariaDB/MySQL would refuse the statement by ``max_allowed_packet``).

    The outcome is recorded all the same: the effect is ``confirmed`` with the
    receipt's reference, and the history says what was left out. Retrying
    cannot make the receipt smaller: return less from the provider.
    """

    code = "receipt-too-large"


class EffectPayloadConflictError(PayloadConflictError, EffectError):
    """The effect ledger holds this effect key with another payload digest.

    Nothing was sent to the provider and nothing was quarantined
    (``consumer`` is None); ``effect_key`` and ``command_id`` are both the key.
    """

    code = "effect-payload-conflict"

    def __init__(
        self, message: str, *, effect_key: str, stored_digest: str, incoming_digest: str
    ) -> None:
        super().__init__(
            message,
            command_id=effect_key,
            stored_digest=stored_digest,
            incoming_digest=incoming_digest,
        )
        self.effect_key = effect_key
