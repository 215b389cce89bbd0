"""The dispatcher: delivers outbox rows at least once, under their command IDs.

One pass (:meth:`Dispatcher.run_once`) has three steps:

1. **lease** (short transaction): due rows are picked with ``FOR UPDATE SKIP
   LOCKED`` and given a lease: ``due_at`` moves to the lease's end, the
   attempt is counted and a random token is stamped. The transaction commits
   at once, so no row lock is held while the broker is called.
2. **send** (no transaction): each row goes to the transport with its command
   ID and digest. A row is not sent once three quarters of the lease have
   passed; it is handed back instead, so a second dispatcher never claims a
   row that is still being sent in normal operation.
3. **record** (short transaction): delivered rows get ``delivered_at`` and the
   broker's receipt; failed rows a retry time (per-row backoff) or, after
   ``max_attempts``, ``dead_at``. Only the committed record makes a row
   delivered. A crash between send and record leaves the lease to expire and
   the row is sent again, with the same command ID, for the receiving inbox
   to absorb.
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from inboxguard._core.clock import checked_now
from inboxguard._core.text import error_text
from inboxguard._telemetry import check_switch, telemetry_for
from inboxguard.errors import ConfigurationError
from inboxguard.outbox._checks import check_dispatcher_arguments
from inboxguard.outbox._outbox import Outbox
from inboxguard.outbox._pass import (
    Outcome,
    dead_record,
    encoded_receipt,
    exponential_backoff,
    message_of,
    release_record,
)
from inboxguard.outbox._records import Transport
from inboxguard.outbox._wakeup import WakeUp
from inboxguard.sql.dialects.sqlite.dispatcher_lock import SqliteDispatcherLock
from inboxguard.sql.errors import OUTBOX_SCHEMA, schema_required

__all__ = ["DispatchStats", "Dispatcher", "exponential_backoff"]

logger = logging.getLogger("inboxguard.outbox")
#: Consecutive transport failures after which the rest of a batch waits.
_FAILURE_STREAK = 3


@dataclass(slots=True)
class DispatchStats:
    """Counters of one dispatcher since it started."""

    batches: int = 0
    delivered: int = 0
    failed: int = 0
    dead: int = 0
    released: int = 0


class Dispatcher:
    """Delivers an :class:`Outbox`'s rows through a transport, at least once.

    Several dispatchers may run against PostgreSQL or MariaDB/MySQL: they
    claim disjoint batches and, in normal operation, never send a row twice.
    SQLite runs one dispatcher per database (a second one is refused).

    Args:
        outbox: the outbox to drain.
        transport: ``transport(message) -> receipt | None``; raising means
            "not delivered". See ``inboxguard.adapters._transport`` for Celery,
            Dramatiq and kombu.
        batch_size: rows claimed per pass.
        max_attempts: attempts before a row is marked dead.
        lease: how long a claimed row stays with this dispatcher; it must
            cover sending a whole batch.
        backoff: ``attempt -> delay`` before a failed row is due again
            (default: exponential from 1 s, capped at 5 min).
        poll_interval: wait between passes that found nothing to do.
        wakeup: on PostgreSQL, LISTEN for the outbox's NOTIFY so a commit
            wakes the dispatcher before the poll interval ends; a lost LISTEN
            connection is opened again with backoff, polling meanwhile.
        telemetry: count sends, failures and dead rows and time the dispatch
            lag with OpenTelemetry when ``opentelemetry-api`` is installed;
            ``False`` turns it off.

    Raises:
        ConfigurationError: a bad argument.
    """

    def __init__(  # noqa: PLR0913 (keyword-only settings)
        self,
        outbox: Outbox,
        transport: Transport,
        *,
        batch_size: int = 100,
        max_attempts: int = 10,
        lease: dt.timedelta = dt.timedelta(seconds=60),
        backoff: Callable[[int], dt.timedelta] | None = None,
        poll_interval: dt.timedelta = dt.timedelta(seconds=1),
        wakeup: bool = False,
        telemetry: bool = True,
    ) -> None:
        if not isinstance(outbox, Outbox):
            msg = f"outbox must be an inboxguard.Outbox, got {type(outbox).__name__}"
            raise ConfigurationError(msg)
        check_dispatcher_arguments(transport, batch_size, max_attempts, lease, poll_interval)
        check_switch("telemetry", telemetry)
        if wakeup and not outbox.statements.supports_notify:
            msg = (
                "wakeup=True needs PostgreSQL LISTEN/NOTIFY, which this outbox's database"
                " lacks; the dispatcher polls every poll_interval"
            )
            raise ConfigurationError(msg)
        self.outbox = outbox
        self.transport = transport
        self.batch_size = batch_size
        self.max_attempts = max_attempts
        self.lease = lease
        self.backoff = backoff or exponential_backoff()
        self.poll_interval = poll_interval
        self.wakeup = wakeup
        self.stats = DispatchStats()
        self._telemetry = telemetry_for(telemetry)
        self._stop = threading.Event()
        self._wakeup: WakeUp | None = None
        self._lock: SqliteDispatcherLock | None = None
        if not outbox.statements.concurrent_dispatchers:
            self._lock = SqliteDispatcherLock(outbox.engine)

    # -- one pass -----------------------------------------------------------------------

    def run_once(self) -> int:
        """Claim one batch, send it and record the outcome; return how many
        rows were delivered (recorded as such).

        Raises:
            ConfigurationError: SQLite, and another dispatcher is running; the
                outbox table does not exist.
        """
        if self._lock is not None:
            self._lock.acquire()
        outbox, st = self.outbox, self.outbox.statements
        now = checked_now(outbox.clock)
        token = uuid.uuid4().hex
        lease_until = now + self.lease
        with schema_required(OUTBOX_SCHEMA), outbox.engine.connect() as conn:
            if st.claim_isolation_level is not None:
                conn = conn.execution_options(isolation_level=st.claim_isolation_level)  # noqa: PLW2901
            with conn.begin():
                rows = st.claim(
                    conn, now=now, lease_until=lease_until, token=token, limit=self.batch_size
                )
        if not rows:
            return 0
        self.stats.batches += 1
        outcome = Outcome([], [], [], [])
        try:
            self._send_all(rows, token, now + self.lease * 3 / 4, outcome)
        finally:
            self._record(token, outcome)
        return len(outcome.delivered)

    def _send_all(
        self, rows: Sequence[Sequence[Any]], token: str, send_by: dt.datetime, out: Outcome
    ) -> None:
        """Send the claimed rows in order; whatever happens, every row ends in
        exactly one of ``out``'s lists (unsent rows are released)."""
        pending = list(rows)
        streak = 0
        try:
            while pending:
                row, now = pending.pop(0), checked_now(self.outbox.clock)
                if row[7] > self.max_attempts:
                    error = f"the lease expired {row[7] - 1} times without a recorded outcome"
                    out.dead.append(dead_record(row, token, now, error))
                elif streak >= _FAILURE_STREAK or now >= send_by or self._stop.is_set():
                    due = now + self.backoff(1) if streak else now
                    pending.insert(0, row)
                    out.released.extend(release_record(r, token, due) for r in pending)
                    pending.clear()
                else:
                    streak = 0 if self._send(row, token, out) else streak + 1
        finally:  # a BaseException from a send: hand the unsent rows back
            now = checked_now(self.outbox.clock)
            out.released.extend(release_record(r, token, now) for r in pending)

    def _send(self, row: Sequence[Any], token: str, out: Outcome) -> bool:
        """Send one row and file its outcome; True if it was delivered.

        Any failure of this row (building its message, the transport, a
        ``BaseException`` such as gevent's ``Timeout``) files it as failed;
        a ``BaseException`` is raised again once it is filed, and stops the
        dispatcher after the batch is recorded.
        """
        try:
            receipt = self.transport(message_of(row))
        except BaseException as exc:  # any failure means "not delivered"
            self._failed(row, token, exc, out)
            if not isinstance(exc, Exception):
                raise
            return False
        out.delivered.append(
            {
                "b_id": row[0],
                "b_at": checked_now(self.outbox.clock),
                "b_receipt": encoded_receipt(receipt, row[1]),
            }
        )
        logger.debug("delivered %s", row[1])
        if self._telemetry.enabled:
            self._lag(row)
        return True

    def _lag(self, row: Sequence[Any]) -> None:
        """Time from the row's commit (its creation time) to its send."""
        try:
            lag = (checked_now(self.outbox.clock) - row[6]).total_seconds()
        except Exception:  # a naive time from a foreign writer: no figure
            return
        self._telemetry.record("outbox_lag", lag, {"messaging.destination.name": row[2]})

    def _failed(self, row: Sequence[Any], token: str, exc: BaseException, out: Outcome) -> None:
        row_id, command_id, attempt = row[0], row[1], row[7]
        now = checked_now(self.outbox.clock)
        error = error_text(exc, what=f"the send error of outbox row {command_id}", limit=2000)
        if attempt >= self.max_attempts:
            logger.error(
                "outbox row %s is dead after %d attempts: %s",
                command_id,
                attempt,
                error,
                extra={"command_id": command_id, "attempts": attempt},
            )
            out.dead.append(dead_record(row, token, now, error))
            return
        delay = self.backoff(attempt)
        logger.warning(
            "outbox row %s not delivered (attempt %d of %d), retry in %s: %s",
            command_id,
            attempt,
            self.max_attempts,
            delay,
            error,
            extra={"command_id": command_id, "attempts": attempt},
        )
        out.failed.append(
            {"b_id": row_id, "b_token": token, "b_due": now + delay, "b_error": error}
        )

    def _record(self, token: str, out: Outcome) -> None:
        st = self.outbox.statements
        with self.outbox.engine.begin() as conn:
            for stmt, params in (
                (st.mark_delivered, out.delivered),
                (st.mark_failed, out.failed),
                (st.mark_dead, out.dead),
                (st.release, out.released),
            ):
                if params:
                    conn.execute(stmt, params)
        self.stats.delivered += len(out.delivered)
        self.stats.failed += len(out.failed)
        self.stats.dead += len(out.dead)
        self.stats.released += len(out.released)
        self._telemetry.add("outbox_sends", len(out.delivered), {})
        self._telemetry.add("outbox_failures", len(out.failed), {})
        self._telemetry.add("outbox_dead", len(out.dead), {})

    # -- the loop -----------------------------------------------------------------------

    def run_forever(self, *, install_signal_handlers: bool = True) -> DispatchStats:
        """Dispatch until :meth:`stop` (or SIGTERM / SIGINT) is received.

        A stop lets the current batch finish sending what it already sent and
        record it; unsent rows of the batch are handed back. Database errors
        are logged and retried after ``poll_interval``. Returns the counters.
        """
        self._stop.clear()
        previous = self._install_handlers() if install_signal_handlers else {}
        try:
            if self.wakeup:
                listen = self.outbox.statements.listen(self.outbox.channel)
                self._wakeup = WakeUp(self.outbox.engine, listen)
                self._wakeup.start()
            while not self._stop.is_set():
                try:
                    delivered = self.run_once()
                except ConfigurationError:
                    raise
                except Exception:
                    logger.exception(
                        "outbox dispatch pass failed; retrying after the poll interval"
                    )
                    delivered = 0
                if delivered < self.batch_size:
                    self._idle()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.close()
        return self.stats

    @property
    def listening(self) -> bool:
        """True while a ``wakeup`` dispatcher holds an open LISTEN connection
        (False while it polls, before it starts and after it stopped)."""
        return self._wakeup is not None and self._wakeup.listening

    @property
    def _listener(self) -> object | None:
        """The open LISTEN connection, or None (kept for tests that wait on it)."""
        return self._wakeup.listener if self._wakeup is not None else None

    def stop(self) -> None:
        """Ask :meth:`run_forever` to finish its batch and return (thread-safe)."""
        self._stop.set()

    def close(self) -> None:
        """Release the LISTEN connection and the SQLite dispatcher lock."""
        if self._wakeup is not None:
            self._wakeup.close()
            self._wakeup = None
        if self._lock is not None:
            self._lock.release()

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _idle(self) -> None:
        seconds = self.poll_interval.total_seconds()
        if self._wakeup is not None:
            self._wakeup.wait(seconds, self._stop)
        else:
            self._stop.wait(seconds)

    def _install_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def on_signal(signum: int, frame: FrameType | None) -> None:
            logger.info("signal %d received: finishing the current batch", signum)
            self._stop.set()

        return {
            signum: signal.signal(signum, on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
        }
