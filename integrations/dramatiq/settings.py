"""Settings of the reference app, read from the environment.

``INBOXGUARD_DRAMATIQ_DB_URL``      SQLAlchemy URL of the business database
``INBOXGUARD_DRAMATIQ_BROKER_URL``  ``redis://...`` or ``amqp://...``
``INBOXGUARD_DRAMATIQ_RESULTS_URL``  Redis URL of the Results backend
``INBOXGUARD_DRAMATIQ_PREFIX``      table prefix (inbox and business tables)
``INBOXGUARD_DRAMATIQ_QUEUE``       queue of the ``ship`` actor
``INBOXGUARD_DRAMATIQ_RETENTION_DAYS``  the inbox's replay window (default 45)
``INBOXGUARD_DRAMATIQ_GUARD``       ``0`` runs the actor without the inbox (baseline)
``INBOXGUARD_DRAMATIQ_WORK_MS``     extra work per command, in ms (default 0)
``INBOXGUARD_DRAMATIQ_ACK_DELAY_MS``  fault injection: a pause between commit and ack
``INBOXGUARD_DRAMATIQ_REDIS_HEARTBEAT_MS``  Redis heartbeat timeout (default 60000)
``INBOXGUARD_DRAMATIQ_HANG_IN_BODY``  an order whose actor stops for good in its transaction
``INBOXGUARD_DRAMATIQ_HANG_AFTER_COMMIT``  one that stops for good after the COMMIT, unacked
``INBOXGUARD_DRAMATIQ_EVIDENCE``    benchmark only: ``1`` with ``GUARD=0`` adds a plain insert
                                    of the inbox row (the evidence-row floor, see the worker)
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PREFIX_ENV = "INBOXGUARD_DRAMATIQ_"


@dataclass(frozen=True)
class Settings:
    db_url: str
    broker_url: str
    results_url: str
    prefix: str
    queue: str
    retention_days: float
    guard: bool
    work_ms: int
    ack_delay_ms: int
    redis_heartbeat_ms: int
    hang_in_body: str = ""
    hang_after_commit: str = ""
    evidence: bool = False

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ

        def get(name: str, default: str | None = None) -> str:
            value = env.get(PREFIX_ENV + name, default)
            if value is None:
                msg = f"set {PREFIX_ENV}{name} (see integrations/dramatiq/settings.py)"
                raise SystemExit(msg)
            return value

        return cls(
            db_url=get("DB_URL"),
            broker_url=get("BROKER_URL", "redis://127.0.0.1:6379/0"),
            results_url=get("RESULTS_URL", "redis://127.0.0.1:6379/0"),
            prefix=get("PREFIX", "shop_"),
            queue=get("QUEUE", "shipping"),
            retention_days=float(get("RETENTION_DAYS", "45")),
            guard=get("GUARD", "1") != "0",
            work_ms=int(get("WORK_MS", "0")),
            ack_delay_ms=int(get("ACK_DELAY_MS", "0")),
            redis_heartbeat_ms=int(get("REDIS_HEARTBEAT_MS", "60000")),
            hang_in_body=get("HANG_IN_BODY", ""),
            hang_after_commit=get("HANG_AFTER_COMMIT", ""),
            evidence=get("EVIDENCE", "0") != "0",
        )

    def env(self) -> dict[str, str]:
        """These settings as environment variables, for a child process."""
        return {
            PREFIX_ENV + "DB_URL": self.db_url,
            PREFIX_ENV + "BROKER_URL": self.broker_url,
            PREFIX_ENV + "RESULTS_URL": self.results_url,
            PREFIX_ENV + "PREFIX": self.prefix,
            PREFIX_ENV + "QUEUE": self.queue,
            PREFIX_ENV + "RETENTION_DAYS": str(self.retention_days),
            PREFIX_ENV + "GUARD": "1" if self.guard else "0",
            PREFIX_ENV + "WORK_MS": str(self.work_ms),
            PREFIX_ENV + "ACK_DELAY_MS": str(self.ack_delay_ms),
            PREFIX_ENV + "REDIS_HEARTBEAT_MS": str(self.redis_heartbeat_ms),
            PREFIX_ENV + "HANG_IN_BODY": self.hang_in_body,
            PREFIX_ENV + "HANG_AFTER_COMMIT": self.hang_after_commit,
            PREFIX_ENV + "EVIDENCE": "1" if self.evidence else "0",
        }
