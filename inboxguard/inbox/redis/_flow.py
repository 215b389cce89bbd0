"""The Redis guard as one sans-I/O flow, on the inbox's shared decisions.

Every decision is :mod:`inboxguard.inbox._decide`'s, as in the SQL flow
(:mod:`inboxguard.inbox._flow`): validation and digest, the retention
horizon, the verdict on stored evidence (fresh, duplicate, mismatch), the
in-progress and stale errors, the result's encoding, and the quarantine
record's values. What differs is only the I/O, asked for by yielding a
request that a driver (:mod:`._drive`, sync and asyncio) performs, in the
SQL flow's words where the stores do the same (:mod:`._requests`):

1. validate the delivery (no I/O; bad input raises);
2. :class:`Connect`: the driver checks the caller's pipeline (transactional,
   nothing queued yet, not in ``MULTI``);
3. a ``sent_at`` older than the horizon: :class:`WriteQuarantine`, then
   :class:`~inboxguard.BeyondRetentionError`;
4. :class:`ClaimLease`: ``WATCH`` the evidence key, then, in one script,
   read the evidence or take the command's lease; while another delivery
   holds the lease, :class:`Pause` and ask again until ``lock_timeout``
   (then :class:`~inboxguard.InProgressError`);
5. the verdict: a mismatch is quarantined and raised; a fresh or duplicate
   entry is handed to the caller's block (:class:`HandOver`) after
   :class:`Multi` (for a fresh one, the claim queued first inside ``MULTI``);
6. the block's exit: a pipeline executed or reset inside the block is a
   :class:`~inboxguard.ConfigurationError`; on a cluster every queued key
   must be in the command's hash slot;
7. :class:`Commit`: queue the result and send ``EXEC``. When ``EXEC`` is
   aborted (a watched key changed), nothing was applied: the command is
   judged again (:class:`Inspect`) and the caller gets the mismatch or a
   retryable :class:`~inboxguard.InProgressError`, never a second apply.

A fresh claim that does not commit gives its lease back (:class:`Release`).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inboxguard._core.clock import Clock
from inboxguard._core.retention import RetentionPolicy
from inboxguard._telemetry import Telemetry, telemetry_for
from inboxguard.errors import ConfigurationError, InProgressError, PayloadMismatchError
from inboxguard.inbox._decide import (
    Delivery,
    busy_error,
    prepare,
    refusal_values,
    result_json,
    stale_error,
)
from inboxguard.inbox._decide import verdict as judge
from inboxguard.inbox._records import InboxEntry, QuarantineReason
from inboxguard.inbox.redis._keys import CommandKeys, KeySpace, slot_of
from inboxguard.inbox.redis._requests import (
    POLL_INTERVAL,
    BlockExit,
    ClaimLease,
    Command,
    Commit,
    Connect,
    Found,
    HandOver,
    Inspect,
    Multi,
    Pause,
    RedisFlow,
    Release,
    Request,
    SlotTable,
    WriteQuarantine,
)
from inboxguard.sql.dialects import Claim

__all__ = ["RedisFlows"]


@dataclass
class RedisFlows:
    """Builds the flows of one Redis inbox."""

    keys: KeySpace
    retention: RetentionPolicy
    clock: Clock
    lock_timeout: dt.timedelta | None
    lease: dt.timedelta
    cluster: bool
    telemetry: Telemetry = field(default_factory=lambda: telemetry_for(False))
    _lease_ms: int = field(init=False)

    def __post_init__(self) -> None:
        self._lease_ms = max(1, int(self.lease / dt.timedelta(milliseconds=1)))

    def guard(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str],
        sent_at: dt.datetime | None,
        details: Mapping[str, Any] | None,
        hash_tag: str | None,
    ) -> RedisFlow:
        """The guard of one delivery, from validation to ``EXEC``."""
        delivery = self._prepare(consumer, command_id, payload, exclude, details)
        keys = self.keys.command(consumer, command_id, hash_tag)
        stale = stale_error(delivery, sent_at, self.retention) if sent_at is not None else None
        # Counted and traced as the SQL flow does: once, at the verdict.
        probe = self.telemetry.claim(delivery.consumer, delivery.command_id)
        try:
            yield Connect()
            if stale is not None:
                yield self._refusal(delivery, QuarantineReason.BEYOND_RETENTION)
                raise stale
            token = uuid.uuid4().hex
            found = yield from self._claim(delivery, keys, token)
            entry = yield from self._verdict(delivery, found)
        except BaseException as error:
            probe.failed(error)
            raise
        fresh = found.state == "fresh"
        probe.decided("fresh" if fresh else "duplicate")
        yield Multi(self._claim_commands(delivery, keys) if fresh else ())
        end: BlockExit = yield HandOver(entry)
        applied = True
        try:
            if not end.kept:
                raise _boundary_error(delivery) from end.error
            if end.error is None:
                if self.cluster:
                    yield from self._check_slots(delivery, keys, end.queued)
                extra = self._result_commands(delivery, keys, entry) if fresh else ()
                applied = yield Commit(extra)
        except Exception:
            if fresh:
                yield Release(keys, token)
            raise
        if end.error is not None:  # the driver discarded the queue and re-raises it
            if fresh:
                yield Release(keys, token)
        elif not applied:
            yield from self._rejudge(delivery, keys, token if fresh else None)

    def quarantine(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        reason: str,
        exclude: Iterable[str],
        details: Mapping[str, Any] | None,
    ) -> WriteQuarantine:
        """The request that refuses a delivery durably (no guard, no claim)."""
        return self._refusal(self._prepare(consumer, command_id, payload, exclude, details), reason)

    # -- steps ---------------------------------------------------------------------------

    def _claim(
        self, delivery: Delivery, keys: CommandKeys, token: str
    ) -> Generator[Request, Any, Found]:
        deadline = (
            None
            if self.lock_timeout is None
            else time.monotonic() + self.lock_timeout.total_seconds()
        )
        while True:
            found: Found = yield ClaimLease(keys, token, self._lease_ms)
            if found.state != "busy":
                return found
            left = found.lease_left_ms / 1000 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise busy_error(delivery.consumer, [delivery.command_id])
            yield Pause(min(POLL_INTERVAL, left))

    def _verdict(self, delivery: Delivery, found: Found) -> Generator[Request, Any, InboxEntry]:
        if found.state == "fresh":
            claim = Claim(True, delivery.digest)
        else:
            claim = Claim(False, found.digest, found.result_json, found.result_expires_at)
        entry = judge(delivery, claim)
        if isinstance(entry, PayloadMismatchError):
            yield self._refusal(
                delivery, QuarantineReason.PAYLOAD_MISMATCH, stored_digest=entry.stored_digest
            )
            raise entry
        return entry

    def _rejudge(
        self, delivery: Delivery, keys: CommandKeys, token: str | None
    ) -> Generator[Request, Any, None]:
        """``EXEC`` was aborted: nothing of the block was applied. Say why."""
        found: Found = yield Inspect(keys)
        if token is not None:
            yield Release(keys, token)
        if found.state == "duplicate":
            yield from self._verdict(delivery, found)  # a mismatch is refused here
        msg = (
            f"the transaction of command {delivery.command_id!r} (consumer"
            f" {delivery.consumer!r}) was not applied: a watched key changed before EXEC"
            + (
                " (another delivery of the command committed first)"
                if found.state == "duplicate"
                else " (another delivery's claim, or a key the caller watched)"
            )
            + "; nothing of the block was written; deliver it again (a duplicate is then"
            " skipped)"
        )
        raise InProgressError(msg, consumer=delivery.consumer, command_id=delivery.command_id)

    def _check_slots(
        self, delivery: Delivery, keys: CommandKeys, queued: tuple[Command, ...]
    ) -> Generator[Request, Any, None]:
        if not queued:
            return
        slot = slot_of(keys.evidence)
        per_command: Sequence[Sequence[object]] = yield SlotTable(queued)
        for command, found in zip(queued, per_command, strict=True):
            for key in found:
                if slot_of(key) != slot:
                    raise _slot_error(delivery, keys, command, key)

    def _claim_commands(self, delivery: Delivery, keys: CommandKeys) -> tuple[Command, ...]:
        p = delivery.params
        fields: list[Any] = [
            "HSET",
            keys.evidence,
            "digest",
            delivery.digest,
            "consumer",
            delivery.consumer,
            "command_id",
            delivery.command_id,
            "processed_at",
            p["processed_at"].isoformat(),
            "expires_at",
            p["expires_at"].isoformat(),
        ]
        if p["result_expires_at"] is not None:
            fields += ["result_expires_at", p["result_expires_at"].isoformat()]
        # The key lives for the horizon from now on the server's clock, so an
        # inbox clock that differs from the server's cannot expire it early.
        ttl_ms = max(1, int(self.retention.horizon / dt.timedelta(milliseconds=1)))
        return (tuple(fields), ("PEXPIRE", keys.evidence, ttl_ms), ("DEL", keys.lease))

    def _result_commands(
        self, delivery: Delivery, keys: CommandKeys, entry: InboxEntry
    ) -> tuple[Command, ...]:
        if not entry._result_set or entry.result is None:  # noqa: SLF001
            return ()
        return (("HSET", keys.evidence, "result", result_json(entry)),)

    def _prepare(
        self,
        consumer: str,
        command_id: str,
        payload: object,
        exclude: Iterable[str],
        details: Mapping[str, Any] | None,
    ) -> Delivery:
        return prepare(
            consumer,
            command_id,
            payload,
            exclude,
            details,
            retention=self.retention,
            clock=self.clock,
        )

    def _refusal(
        self, delivery: Delivery, reason: str, *, stored_digest: str | None = None
    ) -> WriteQuarantine:
        values = refusal_values(delivery, reason, stored_digest=stored_digest)
        return WriteQuarantine(None, values)


def _boundary_error(delivery: Delivery) -> ConfigurationError:
    msg = (
        f"the pipeline of command {delivery.command_id!r} (consumer {delivery.consumer!r})"
        " was executed, reset or discarded inside the guarded block (pipe.execute(),"
        " pipe.reset(), pipe.discard()): the block's writes no longer commit with the"
        " claim in the guard's EXEC. Queue writes only; the guard sends EXEC when the"
        " block exits"
    )
    return ConfigurationError(msg)


def _slot_error(
    delivery: Delivery, keys: CommandKeys, command: Command, key: object
) -> ConfigurationError:
    name = command[0].decode() if isinstance(command[0], bytes) else str(command[0])
    msg = (
        f"command {delivery.command_id!r} (consumer {delivery.consumer!r}) queued"
        f" {name.upper()} on key {key!r}, which is in another Redis Cluster hash slot than"
        f" the inbox's keys (hash tag {{{keys.tag}}}): EXEC would fail with CROSSSLOT."
        " Nothing was sent. Name every key the block writes with one hash tag, e.g."
        " 'balance:{acct-42}', and put the same tag in the command ID, e.g."
        " command_id='{acct-42}:t-1' (the tag is then part of the command's identity)"
    )
    return ConfigurationError(msg)
