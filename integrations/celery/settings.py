"""Settings of the reference app, from environment variables, and its Celery config.

=================================  =========================================================
``INBOXGUARD_DB_URL``              SQLAlchemy URL of the business database (required)
``INBOXGUARD_BROKER_URL``          ``redis://...`` or ``amqp://...`` (default: local Redis)
``INBOXGUARD_TABLE_PREFIX``        prefix of the business and inbox tables (``ref_``)
``INBOXGUARD_QUEUE``               queue the worker consumes (``inboxguard-reference``)
``INBOXGUARD_RETENTION_SECONDS``   dead-letter replay window kept as evidence (7 days)
``INBOXGUARD_VISIBILITY_TIMEOUT``  Redis visibility timeout in seconds (3600)
``INBOXGUARD_RESTORE_INTERVAL``    seconds between Redis unacked-restore scans (kombu: 100)
``INBOXGUARD_TASK_DELAY``          seconds the task body sleeps (tests use it to kill mid-batch)
``INBOXGUARD_REDIS_KEYPREFIX``     prefix of every Redis key kombu writes (none)
``INBOXGUARD_LOCK_TIMEOUT_MS``     how long a claim waits for another worker's (inbox default)
``INBOXGUARD_HANG_IN_BODY``        a transfer ID whose task stops for good inside its transaction
``INBOXGUARD_HANG_AFTER_COMMIT``   a transfer ID whose task stops for good after the commit, unacked
=================================  =========================================================
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

TASK_NAME = "reference.apply_transfer"
PLAIN_TASK_NAME = "reference.apply_transfer_plain"
#: The benchmark's floor (``python -m benchmarks celery``), not for users.
EVIDENCE_TASK_NAME = "reference.apply_transfer_evidence"


@dataclass(frozen=True)
class Settings:
    db_url: str
    broker_url: str = "redis://127.0.0.1:6379/0"
    table_prefix: str = "ref_"
    queue: str = "inboxguard-reference"
    retention: dt.timedelta = dt.timedelta(days=7)
    visibility_timeout: int = 3600
    restore_interval: int | None = None
    task_delay: float = 0.0
    redis_keyprefix: str = ""
    lock_timeout: dt.timedelta | None = None
    hang_in_body: str = ""
    hang_after_commit: str = ""

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        db_url = env.get("INBOXGUARD_DB_URL")
        if not db_url:
            msg = "set INBOXGUARD_DB_URL to the SQLAlchemy URL of the business database"
            raise SystemExit(msg)
        restore = env.get("INBOXGUARD_RESTORE_INTERVAL")
        wait = env.get("INBOXGUARD_LOCK_TIMEOUT_MS")
        return cls(
            db_url=db_url,
            broker_url=env.get("INBOXGUARD_BROKER_URL", cls.broker_url),
            table_prefix=env.get("INBOXGUARD_TABLE_PREFIX", cls.table_prefix),
            queue=env.get("INBOXGUARD_QUEUE", cls.queue),
            retention=dt.timedelta(seconds=int(env.get("INBOXGUARD_RETENTION_SECONDS", 7 * 86400))),
            visibility_timeout=int(env.get("INBOXGUARD_VISIBILITY_TIMEOUT", 3600)),
            restore_interval=int(restore) if restore else None,
            task_delay=float(env.get("INBOXGUARD_TASK_DELAY", 0)),
            redis_keyprefix=env.get("INBOXGUARD_REDIS_KEYPREFIX", ""),
            lock_timeout=dt.timedelta(milliseconds=int(wait)) if wait else None,
            hang_in_body=env.get("INBOXGUARD_HANG_IN_BODY", ""),
            hang_after_commit=env.get("INBOXGUARD_HANG_AFTER_COMMIT", ""),
        )

    def env(self) -> dict[str, str]:
        """The environment variables that reproduce these settings."""
        out = {
            "INBOXGUARD_DB_URL": self.db_url,
            "INBOXGUARD_BROKER_URL": self.broker_url,
            "INBOXGUARD_TABLE_PREFIX": self.table_prefix,
            "INBOXGUARD_QUEUE": self.queue,
            "INBOXGUARD_RETENTION_SECONDS": str(int(self.retention.total_seconds())),
            "INBOXGUARD_VISIBILITY_TIMEOUT": str(self.visibility_timeout),
            "INBOXGUARD_TASK_DELAY": str(self.task_delay),
            "INBOXGUARD_REDIS_KEYPREFIX": self.redis_keyprefix,
            "INBOXGUARD_HANG_IN_BODY": self.hang_in_body,
            "INBOXGUARD_HANG_AFTER_COMMIT": self.hang_after_commit,
        }
        if self.restore_interval is not None:
            out["INBOXGUARD_RESTORE_INTERVAL"] = str(self.restore_interval)
        if self.lock_timeout is not None:
            out["INBOXGUARD_LOCK_TIMEOUT_MS"] = str(int(self.lock_timeout.total_seconds() * 1000))
        return out

    @property
    def is_rabbitmq(self) -> bool:
        return self.broker_url.startswith(("amqp", "pyamqp"))


def work_queue(settings: Settings) -> Queue:
    """The work queue; on RabbitMQ, rejected messages go to the dead-letter exchange."""
    arguments: dict[str, Any] | None = None
    if settings.is_rabbitmq:
        arguments = {
            "x-dead-letter-exchange": f"{settings.queue}.dlx",
            "x-dead-letter-routing-key": f"{settings.queue}.dead",
        }
    return Queue(
        settings.queue,
        Exchange(settings.queue, type="direct"),
        routing_key=settings.queue,
        queue_arguments=arguments,
    )


def dead_letter_queue(settings: Settings) -> Queue:
    """Where RabbitMQ puts messages the guard rejected (payload mismatch, too old)."""
    return Queue(
        f"{settings.queue}.dead",
        Exchange(f"{settings.queue}.dlx", type="direct"),
        routing_key=f"{settings.queue}.dead",
    )


def celery_config(settings: Settings) -> dict[str, Any]:
    """The settings the guarantees depend on, for Redis or RabbitMQ."""
    config: dict[str, Any] = {
        "broker_url": settings.broker_url,
        "broker_connection_retry_on_startup": True,
        "task_default_queue": settings.queue,
        "task_queues": [work_queue(settings)],
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        # Ack after the commit; requeue the message of a killed child.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        # Hold one unacked message per process, not four.
        "worker_prefetch_multiplier": 1,
        # The dead-letter queue is replayed for up to this long: keep evidence as long.
        "inboxguard_replay_windows": {"dead_letter_replay": settings.retention},
    }
    if not settings.is_rabbitmq:
        options: dict[str, Any] = {
            "visibility_timeout": settings.visibility_timeout,
            # kombu's restore lock outlives a worker killed while holding it
            # for this long (300 s by default), blocking every restore.
            "unacked_mutex_expire": 5,
        }
        if settings.redis_keyprefix:
            # Also separates kombu's unacked index, which is otherwise shared by
            # every consumer of the Redis database.
            options["global_keyprefix"] = settings.redis_keyprefix
        if settings.restore_interval is not None:
            options["unacked_restore_interval"] = settings.restore_interval
            options["unacked_restore_throttle"] = 1
        config["broker_transport_options"] = options
    return config


def create_app(settings: Settings, *, include_tasks: bool = True) -> Celery:
    app = Celery(
        "inboxguard_reference",
        include=["integrations.celery.tasks"] if include_tasks else [],
        set_as_current=include_tasks,
    )
    app.conf.update(celery_config(settings))
    return app


def declare_dead_letter(app: Celery, settings: Settings) -> None:
    """Declare the dead-letter exchange and queue (RabbitMQ only; idempotent)."""
    if not settings.is_rabbitmq:
        return
    with app.connection_for_write() as conn:
        dead_letter_queue(settings).bind(conn.default_channel).declare()
