"""The payments app shared by the kombu and asyncio reference consumers.

Settings come from the environment; the app's own table is the business
mutation the inbox guards.

- ``INBOXGUARD_DB_URL``: SQLAlchemy URL (the asyncio consumer swaps in the
  asyncpg / aiosqlite driver). Default ``sqlite:///inbox-demo.db``.
- ``INBOXGUARD_BROKER_URL``: broker URL (amqp://..., redis://... for kombu).
- ``INBOXGUARD_TABLE_PREFIX``: prefix of the inbox and app tables (``demo_``).
- ``INBOXGUARD_QUEUE``: queue name (``inboxguard-demo``).
- ``INBOXGUARD_LOCK_TIMEOUT_MS``: claim lock wait before "in progress" (2000).
- ``INBOXGUARD_MAX_ATTEMPTS``: deliveries before ``retries_exhausted`` (5).
- ``INBOXGUARD_RETRY_DELAY_MS``: spacing of retried deliveries (1000).
- ``INBOXGUARD_HANDLER_DELAY_MS``: work simulated in each transaction (0).
- ``INBOXGUARD_DELIVERY_LOG``: file receiving a line ``ID`` when a delivery
  starts and ``+ID`` when it is settled (none).
- ``INBOXGUARD_VISIBILITY_TIMEOUT``: Redis, seconds before an unacked message
  is delivered again (3600).
- ``INBOXGUARD_HANG_IN_BODY`` / ``INBOXGUARD_HANG_BEFORE_ACK``: a command ID at
  which the consumer prints ``hang <ID>`` and stops for good, inside its
  transaction or after the commit but before the ack (tests kill it there).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass, field

from sqlalchemy import Column, Integer, MetaData, String, Table, event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard

#: How long the reference apps keep evidence.
RETENTION = dt.timedelta(days=7)
_ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}


def async_url(url: str) -> str:
    """The same database through its asyncio driver (asyncpg or aiosqlite)."""
    scheme, rest = url.split("://", 1)
    return f"{_ASYNC_DRIVERS.get(scheme.split('+')[0], scheme)}://{rest}"


def _ms(name: str, default: str) -> dt.timedelta:
    return dt.timedelta(milliseconds=int(os.environ.get(name, default)))


@dataclass(frozen=True)
class Config:
    """Everything the worker and the producer need."""

    db_url: str = field(
        default_factory=lambda: os.environ.get("INBOXGUARD_DB_URL", "sqlite:///inbox-demo.db")
    )
    broker_url: str = field(
        default_factory=lambda: os.environ.get(
            "INBOXGUARD_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//"
        )
    )
    prefix: str = field(default_factory=lambda: os.environ.get("INBOXGUARD_TABLE_PREFIX", "demo_"))
    queue: str = field(
        default_factory=lambda: os.environ.get("INBOXGUARD_QUEUE", "inboxguard-demo")
    )
    lock_timeout: dt.timedelta = field(
        default_factory=lambda: _ms("INBOXGUARD_LOCK_TIMEOUT_MS", "2000")
    )
    max_attempts: int = field(
        default_factory=lambda: int(os.environ.get("INBOXGUARD_MAX_ATTEMPTS", "5"))
    )
    retry_delay: dt.timedelta = field(
        default_factory=lambda: _ms("INBOXGUARD_RETRY_DELAY_MS", "1000")
    )
    handler_delay: dt.timedelta = field(
        default_factory=lambda: _ms("INBOXGUARD_HANDLER_DELAY_MS", "0")
    )
    delivery_log: str | None = field(
        default_factory=lambda: os.environ.get("INBOXGUARD_DELIVERY_LOG")
    )
    visibility_timeout: int = field(
        default_factory=lambda: int(os.environ.get("INBOXGUARD_VISIBILITY_TIMEOUT", "3600"))
    )
    hang_in_body: str | None = field(
        default_factory=lambda: os.environ.get("INBOXGUARD_HANG_IN_BODY")
    )
    hang_before_ack: str | None = field(
        default_factory=lambda: os.environ.get("INBOXGUARD_HANG_BEFORE_ACK")
    )

    def transport_options(self) -> dict[str, int | str]:
        """Redis redelivers unacked messages after the visibility timeout.

        The key prefix keeps kombu's unacked index and restore lock apart from
        every other consumer of the Redis database. kombu holds that lock for
        up to ``unacked_mutex_expire`` (300 s by default) and a worker killed
        while holding it blocks every restore for that long; the scan is short
        and each restore is a watched transaction, so a short lease is safe.
        """
        if not self.broker_url.startswith("redis"):
            return {}
        return {
            "visibility_timeout": self.visibility_timeout,
            "unacked_restore_interval": 1,
            "unacked_restore_throttle": 1,
            "unacked_mutex_expire": 5,
            "global_keyprefix": self.prefix,
        }


def hang(command_id: str) -> None:
    """Stop here for good, announcing it, so a test can ``kill -9`` at this point."""
    print(f"hang {command_id}", flush=True)
    time.sleep(3600)


def hang_after_commit(session: Session, command_id: str) -> None:
    """:func:`hang` right after ``session``'s transaction commits, with its
    ack or offset commit not sent. The release of a session savepoint
    (``begin_nested()``) fires the same ``after_commit`` event, so only the
    commit of the outermost transaction counts."""

    def committed(done: Session) -> None:
        if done.get_nested_transaction() is None:
            hang(command_id)

    event.listen(session, "after_commit", committed)


def payments_table(prefix: str, metadata: MetaData | None = None) -> Table:
    """The app's own table: one row per applied payment (no unique key, so a
    double application would show as two rows)."""
    return Table(
        f"{prefix}payments",
        metadata or MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("command_id", String(100), nullable=False),
        Column("amount", Integer, nullable=False),
    )


def make_inbox(engine: Engine, config: Config) -> inboxguard.Inbox:
    """The inbox of the reference apps, with its tables and the app's table created."""
    inbox = inboxguard.Inbox(
        engine,
        retention=RETENTION,
        table_prefix=config.prefix,
        lock_timeout=config.lock_timeout,
    )
    inbox.create_schema()
    table = payments_table(config.prefix)
    table.metadata.create_all(engine)
    return inbox
