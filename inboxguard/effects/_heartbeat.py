"""Keeping a lease while a long call runs: the compensator's heartbeat.

A compensator (a refund) can take longer than its lease. Without a renewal,
another worker would find the lease expired, take the effect over and run the
compensator a second time. The heartbeat renews the lease every third of its
length, fenced by the holder's token and version, for as long as the call
runs; a worker that cannot renew (it lost the lease) stops renewing and says
so in the log.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from types import TracebackType

from inboxguard.effects._recorder import Recorder
from inboxguard.effects._store import Held

__all__ = ["Heartbeat"]

logger = logging.getLogger("inboxguard.effects")


class Heartbeat:
    """Renew ``held``'s lease to ``now + lease`` every ``lease / 3`` while open."""

    def __init__(self, rec: Recorder, held: Held, lease: dt.timedelta) -> None:
        self.rec = rec
        self.held = held
        self.lease = lease
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"inboxguard-heartbeat-{held.key}", daemon=True
        )

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        interval = self.lease.total_seconds() / 3
        while not self._stop.wait(interval):
            try:
                renewed = self.rec.store.renew(self.held, self.rec.now() + self.lease)
            except Exception as error:  # the database is away: try again next beat
                logger.warning(
                    "effect %s: the lease could not be renewed: %r", self.held.key, error
                )
                continue
            if not renewed:
                logger.warning(
                    "effect %s: the lease (fencing token %d) was lost while the call ran",
                    self.held.key,
                    self.held.token,
                )
                return
