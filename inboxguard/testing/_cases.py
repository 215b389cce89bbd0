"""One-line failure cases against a user's own handler."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from inboxguard._core.faults import FaultPoint
from inboxguard.effects import EffectLedger
from inboxguard.effects.provider import KEYS_KEPT_FOREVER
from inboxguard.errors import ConfigurationError
from inboxguard.inbox import Inbox
from inboxguard.testing._clock import ManualClock
from inboxguard.testing._observe import observe
from inboxguard.testing._provider import FakeProvider
from inboxguard.testing._record import CaseRecord
from inboxguard.testing._tap import Tap
from inboxguard.testing._target import Message, Target, attempt, direct, wait_for

__all__ = ["FaultKit"]

#: ``courier(message, run)``: carry one delivery of ``message`` to a worker,
#: which calls ``run(received)``; return the outcome ``run`` returned.
Courier = Callable[[Message, Callable[[Message], str]], str]


class FaultKit:
    """Plays the failure stories against a handler and returns what happened.

    Each case delivers a message the way an at-least-once broker does: a
    delivery that crashed or failed with a retryable error comes back, up to
    ``max_deliveries`` times; one refused for good is dead-lettered. Each
    returns a :class:`CaseRecord` (deliveries, handler runs, provider
    requests and effects, receipts, inbox and ledger state) that
    :func:`assert_effectively_once` accepts.

    Args:
        inbox: the inbox the handler guards with.
        ledger: its effect ledger, if the handler calls a provider through one.
        provider: the :class:`FakeProvider` the handler calls.
        clock: the :class:`ManualClock` shared by all of them; the cases that
            expire a lease, a window or retention move it.
        lease: the lease the handler passes to ``ledger.execute`` (default 30 s);
            a redelivery after a crash comes once it has expired.
        max_deliveries: deliveries of one message before the kit gives up.
        courier: how one delivery reaches a worker (default: a direct call in
            the calling thread); the demo sends each through a broker to
            worker threads. Redeliveries are always made by the case, so that
            it can move the clock in between.
    """

    def __init__(
        self,
        inbox: Inbox,
        *,
        ledger: EffectLedger | None = None,
        provider: FakeProvider | None = None,
        clock: ManualClock | None = None,
        lease: dt.timedelta = dt.timedelta(seconds=30),
        max_deliveries: int = 10,
        courier: Courier | None = None,
    ) -> None:
        if not isinstance(inbox, Inbox):
            msg = f"inbox must be an inboxguard.Inbox, got {type(inbox).__name__}"
            raise ConfigurationError(msg)
        if type(max_deliveries) is not int or max_deliveries < 1:
            msg = f"max_deliveries must be a positive int, got {max_deliveries!r}"
            raise ConfigurationError(msg)
        self.inbox = inbox
        self.ledger = ledger
        self.provider = provider
        self.clock = clock
        self.lease = lease
        self.max_deliveries = max_deliveries
        self.tap = Tap()
        self.courier: Courier = courier or direct

    # -- the cases ----------------------------------------------------------------------

    def deliver(self, handler: Any, message: Message, **ids: str) -> CaseRecord:
        """Deliver once (redelivering until it settles): the control case."""
        return self._sequence("deliver", handler, [message], ids)

    def deliver_twice(self, handler: Any, message: Message, **ids: str) -> CaseRecord:
        """Deliver the same command twice, one after the other."""
        return self._sequence("duplicate", handler, [message, message], ids)

    def deliver_mismatched(
        self, handler: Any, message: Message, changed: Message, **ids: str
    ) -> CaseRecord:
        """Deliver ``message``, then ``changed``: the same command ID with another payload."""
        return self._sequence("mismatch", handler, [message, changed], ids)

    def deliver_concurrently(
        self, handler: Any, message: Message, workers: int = 4, **ids: str
    ) -> CaseRecord:
        """Deliver the same command to ``workers`` threads released at once."""
        if type(workers) is not int or workers < 1:
            msg = f"workers must be a positive int, got {workers!r}"
            raise ConfigurationError(msg)
        target, record = self._start("concurrent", handler, ids)
        start = threading.Barrier(workers)
        lock = threading.Lock()

        def worker() -> list[str]:
            start.wait(30)
            return self._settle(target, message, record, lock, move_clock=False)

        with self.tap.armed(), ThreadPoolExecutor(workers) as pool:
            for outcomes in [f.result() for f in [pool.submit(worker) for _ in range(workers)]]:
                record.outcomes += outcomes
        return self._finish(record)

    def crash(self, handler: Any, message: Message, at: FaultPoint | str, **ids: str) -> CaseRecord:
        """Crash the first delivery at ``at`` (a :class:`FaultPoint`: ``provider_accepted``,
        ``before_commit``, ``before_ack``, ``handler_runs``) with :class:`Crash`,
        then let the broker redeliver once the dead worker's lease expired."""
        self.tap.crash_at(at)
        try:
            return self._sequence(f"crash at {FaultPoint(at)}", handler, [message], ids)
        finally:
            self.tap.clear()

    def expire_lease(self, handler: Any, message: Message, **ids: str) -> CaseRecord:
        """The first worker stalls inside the provider call; its lease expires and
        a second delivery takes the effect over; then the first one wakes up."""
        provider, clock = self._needs_provider_and_clock("expire_lease")
        target, record = self._start("expired lease", handler, ids)
        inside, release = threading.Event(), threading.Event()

        def stall(key: str) -> None:
            provider.after_apply = None
            inside.set()
            release.wait(60)

        provider.after_apply = stall
        lock = threading.Lock()
        with self.tap.armed(), ThreadPoolExecutor(1) as pool:
            first = pool.submit(self._once, target, message, record, lock)
            wait_for(
                lambda: inside.is_set() or first.done(), "the first worker to reach the provider"
            )
            clock.advance(self.lease + dt.timedelta(seconds=1))
            try:
                record.outcomes += self._settle(target, message, record, lock, move_clock=False)
            finally:
                release.set()
            record.outcomes.insert(0, first.result(60))
            record.outcomes += self._settle(target, message, record, lock)
        provider.after_apply = None
        return self._finish(record)

    def retry_after_window(self, handler: Any, message: Message, **ids: str) -> CaseRecord:
        """The provider applies the first call but its answer is lost (``unknown``);
        the retry comes after the provider's idempotency window has closed."""
        provider, clock = self._needs_provider_and_clock("retry_after_window")
        if provider.window == KEYS_KEPT_FOREVER:
            msg = "retry_after_window needs a provider whose window is not KEYS_KEPT_FOREVER"
            raise ConfigurationError(msg)
        target, record = self._start("retry after the window", handler, ids)
        provider.fail_next("accept_then_timeout")
        lock = threading.Lock()
        with self.tap.armed():
            record.outcomes.append(self._once(target, message, record, lock))
            window = provider.window or dt.timedelta(0)
            clock.advance(window + self.lease + dt.timedelta(seconds=1))
            record.outcomes += self._settle(target, message, record, lock)
        return self._finish(record)

    def replay_after_retention(
        self, handler: Any, message: Message, *, sent_at_key: str | None = None, **ids: str
    ) -> CaseRecord:
        """Deliver, let the retention horizon pass and purge, then replay the
        message, both copies carrying the first delivery's time as their sent
        time, so the inbox can refuse the late replay. A Celery task or a
        Dramatiq actor gets it where its adapter reads it (the
        ``x-inbox-sent-at`` header, the message timestamp); for a plain
        function ``sent_at_key`` names the message field the kit writes it
        into (your handler passes it to the guard as ``sent_at=``).

        Raises:
            ConfigurationError: no ``sent_at_key`` and the handler cannot carry
                a sent time (a plain function, an unguarded task or actor).
        """
        clock = self._needs_clock("replay_after_retention")
        first_sent = clock()
        target, record = self._start("replay after retention", handler, ids)
        if sent_at_key is not None:
            message = {**message, sent_at_key: first_sent.isoformat()}
        else:
            target.stamp(first_sent)
        lock = threading.Lock()
        with self.tap.armed():
            record.outcomes += self._settle(target, message, record, lock)
            clock.advance(self.inbox.retention.horizon + dt.timedelta(days=1))
            self.inbox.purge()
            record.outcomes += self._settle(target, message, record, lock)
        return self._finish(record)

    # -- delivery -----------------------------------------------------------------------

    def _sequence(
        self, case: str, handler: Any, messages: list[Message], ids: Mapping[str, str]
    ) -> CaseRecord:
        target, record = self._start(case, handler, ids)
        lock = threading.Lock()
        with self.tap.armed():
            for message in messages:
                record.outcomes += self._settle(target, message, record, lock)
        return self._finish(record)

    def _settle(
        self,
        target: Target,
        message: Message,
        record: CaseRecord,
        lock: threading.Lock,
        *,
        move_clock: bool = True,
    ) -> list[str]:
        """Deliver until acked or dead-lettered, as an at-least-once broker would."""
        outcomes: list[str] = []
        for _ in range(self.max_deliveries):
            outcome = self._once(target, message, record, lock)
            outcomes.append(outcome)
            if not outcome.startswith(("crashed", "retry")):
                break
            if move_clock and self.clock is not None:
                # The broker brings it back once the dead or busy holder's lease expired.
                self.clock.advance(self.lease + dt.timedelta(seconds=1))
            else:
                time.sleep(0.01)  # another worker holds it; let it finish
        return outcomes

    def _once(
        self, target: Target, message: Message, record: CaseRecord, lock: threading.Lock
    ) -> str:
        if not isinstance(message, Mapping):
            msg = f"message must be a mapping (the task's keyword arguments), got {message!r}"
            raise ConfigurationError(msg)
        with lock:
            record.deliveries += 1
        return self.courier(message, lambda received: attempt(target, received, record))

    # -- bookkeeping --------------------------------------------------------------------

    def _start(self, case: str, handler: Any, ids: Mapping[str, str]) -> tuple[Target, CaseRecord]:
        unknown = set(ids) - {"consumer", "command_id", "effect_key"}
        if unknown:
            msg = f"unknown keyword {sorted(unknown)}; use consumer=, command_id=, effect_key="
            raise TypeError(msg)
        self.tap.runs.clear()
        record = CaseRecord(
            case=case,
            consumer=ids.get("consumer"),
            command_id=ids.get("command_id"),
            effect_key=ids.get("effect_key"),
            inbox=self.inbox,
            ledger=self.ledger,
            provider=self.provider,
        )
        return Target(handler), record

    def _finish(self, record: CaseRecord) -> CaseRecord:
        return observe(record, self.inbox, self.ledger, self.provider, self.tap.runs)

    def _needs_clock(self, case: str) -> ManualClock:
        if self.clock is None:
            msg = f"{case} moves time: build the kit with clock=ManualClock() shared by all parts"
            raise ConfigurationError(msg)
        return self.clock

    def _needs_provider_and_clock(self, case: str) -> tuple[FakeProvider, ManualClock]:
        clock = self._needs_clock(case)
        if self.provider is None or self.ledger is None:
            msg = f"{case} needs ledger= and provider= (a FakeProvider) on the kit"
            raise ConfigurationError(msg)
        return self.provider, clock
