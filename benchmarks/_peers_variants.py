"""The peers of ``benchmarks/peers.py``: one handler, six ways to deduplicate it.

The handler is the mutation of ``benchmarks/bench_inbox.py``: one UPDATE of
the worker's account and one INSERT into the ledger, in one PostgreSQL
transaction, opened the way README.md opens it (``Session(engine)`` and
``session.begin()``). Each variant wraps that handler the way its own
documentation shows:

- ``bare``: the handler alone, no deduplication;
- ``claim``: a hand-written unique-constraint claim, ``INSERT ... ON CONFLICT
  DO NOTHING`` of the command ID into a keyed table in the same transaction;
  a duplicate hits the conflict (row count 0) and skips the mutation;
- ``inboxguard``: ``inbox.guard`` in the same session, as README.md shows,
  the result stored with ``entry.result``;
- ``redis-inbox``: ``RedisInbox.guard`` on a Redis pipeline, with the
  PostgreSQL transaction inside the block: the claim commits in Redis's
  ``EXEC`` after PostgreSQL has committed, so the two are not atomic (the
  Redis inbox is built for state kept in Redis; this is what a user gets who
  puts it in front of a SQL handler);
- ``powertools``: AWS Powertools' ``idempotent_function`` on Redis
  (``CachePersistenceLayer``, the name ``RedisCachePersistenceLayer`` now has),
  keyed on the command ID (``event_key_jmespath="command_id"``,
  ``raise_on_no_idempotency_key=True``). Payload validation stays off: with
  ``payload_validation_jmespath`` set, the Redis layer rewrites the record at
  completion without the payload hash, and every identical retry is then
  refused with ``IdempotencyValidationError`` instead of answered;
- ``evidence`` (timed only, not a peer): the inbox row alone in the same
  transaction, a plain ``INSERT ... VALUES ... ON CONFLICT DO NOTHING`` of
  its six columns into the inbox table (its key and expiry index, no claim
  logic, no inboxguard Python), a conflict skipping the mutation: the floor
  any guard that writes the evidence the guarantees need counts from;
- ``lock``: a Redis lock in the style of celery-once: ``redis.lock.Lock``
  acquired without blocking (``SET NX PX`` with a token) around the handler
  and deleted after it, as celery-once's ``raise_or_lock`` / ``clear_lock``
  do; a delivery that finds the lock held is refused (``AlreadyQueued``).

``committed`` is called right after the business transaction commits,
before the variant records the command or releases its lock: the crash
scenarios kill the process there.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
from sqlalchemy import create_engine, func, insert, select, text, update
from sqlalchemy.orm import Session

from inboxguard import Inbox, RedisInbox
from tests.helpers import business_tables

VARIANTS = ("bare", "claim", "inboxguard", "redis-inbox", "powertools", "lock")
#: Timed but not a peer (no crash scenarios): the evidence row, the floor the
#: guard's targets count from.
TIMED = (*VARIANTS, "evidence")
#: Variants with a duplicate path (the lock has none: released, it runs again).
DEDUP = ("claim", "inboxguard", "redis-inbox", "powertools", "evidence")
CONSUMER = "peers.credit"
RETENTION = dt.timedelta(days=1)

# Outside Lambda, Powertools warns on every call that it has no Lambda context,
# and warns that its Redis class is to be renamed.
warnings.filterwarnings("ignore", message="Couldn't determine the remaining time left")
warnings.filterwarnings("ignore", category=DeprecationWarning, module="aws_lambda_powertools")


class AlreadyQueued(Exception):  # noqa: N818 - celery-once's name for a held lock
    """The lock of this command is held: celery-once's refusal."""


@dataclass(frozen=True)
class Place:
    """Where one run keeps its state.

    ``prefix`` prefixes the tables and the Redis keys; ``ttl`` (seconds) is
    Powertools' ``expires_after_seconds``, the lock's timeout and the Redis
    inbox's lease; ``None`` keeps each tool's default (3,600 s, 3,600 s, 60 s).
    """

    db_url: str
    redis_url: str
    prefix: str
    ttl: int | None = None


def create(place: Place, accounts: int) -> None:
    """Create the inbox, the business tables and the claim table."""
    engine = create_engine(place.db_url)
    Inbox(engine, retention=RETENTION, table_prefix=place.prefix).create_schema()
    md, account_table, _ = business_tables(place.prefix)
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(account_table.insert(), [{"id": i, "balance": 0} for i in range(accounts)])
        conn.execute(
            text(f"CREATE TABLE {place.prefix}claims (command_id VARCHAR(255) PRIMARY KEY)")
        )
    engine.dispose()


def drop_keys(place: Place) -> None:
    """Delete every Redis key of the run."""
    client = redis.Redis.from_url(place.redis_url)
    keys = list(client.scan_iter(match=f"{place.prefix}*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
    client.close()


def _noop() -> None:
    return None


class Peers:
    """Every variant, wired for one worker (its own account row)."""

    def __init__(
        self, place: Place, worker: int = 0, committed: Callable[[], None] = _noop
    ) -> None:
        self.place = place
        self.worker = worker
        self.committed = committed
        self.engine = create_engine(place.db_url, pool_size=1)
        self.redis = redis.Redis.from_url(place.redis_url)
        _, self.accounts, self.ledger = business_tables(place.prefix)
        self.inbox = Inbox(self.engine, retention=RETENTION, table_prefix=place.prefix)
        lease = {} if place.ttl is None else {"lease": dt.timedelta(seconds=place.ttl)}
        self.redis_inbox = RedisInbox(
            self.redis, retention=RETENTION, key_prefix=f"{place.prefix}ig:", **lease
        )
        self.claim_sql = text(
            f"INSERT INTO {place.prefix}claims (command_id) VALUES (:cid) ON CONFLICT DO NOTHING"
        )
        self.lock_timeout = 60 * 60 if place.ttl is None else place.ttl  # celery-once's default
        self._powertools: Callable[..., Any] | None = None  # built on first use (bench extra)
        self.handlers: dict[str, Callable[[str], object]] = {
            "bare": self.bare,
            "claim": self.claim,
            "inboxguard": self.inboxguard,
            "redis-inbox": self.redis_guard,
            "powertools": self.powertools,
            "lock": self.lock,
            "evidence": self.evidence,
        }
        self.evidence_sql = text(
            f"INSERT INTO {place.prefix}inbox (consumer, command_id, digest, processed_at,"
            " expires_at, result_expires_at) VALUES (:consumer, :cid, :digest, :processed_at,"
            " :expires_at, NULL) ON CONFLICT (consumer, command_id) DO NOTHING"
        )

    def close(self) -> None:
        """Release the connections."""
        self.engine.dispose()
        self.redis.close()

    # -- the handler ----------------------------------------------------------------------

    def mutate(self, session: Session, cid: str) -> dict[str, str]:
        """The business change: one UPDATE, one INSERT; returns the handler's result."""
        session.execute(
            update(self.accounts)
            .where(self.accounts.c.id == self.worker)
            .values(balance=self.accounts.c.balance + 1)
        )
        session.execute(insert(self.ledger).values(command_id=cid, amount=1))
        return {"applied": cid}

    @staticmethod
    def body(cid: str) -> dict[str, object]:
        """The message every variant receives."""
        return {"command_id": cid, "amount": 1}

    # -- the variants ---------------------------------------------------------------------

    def bare(self, cid: str) -> object:
        with Session(self.engine) as session, session.begin():
            result = self.mutate(session, cid)
        self.committed()
        return result

    def claim(self, cid: str) -> object:
        with Session(self.engine) as session, session.begin():
            won = session.execute(self.claim_sql, {"cid": cid}).rowcount
            result = self.mutate(session, cid) if won else None
        self.committed()
        return result

    def evidence(self, cid: str) -> object:
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        row = {
            "consumer": CONSUMER,
            "cid": cid,
            "digest": "d" * 64,
            "processed_at": now,
            "expires_at": now + RETENTION,
        }
        with Session(self.engine) as session, session.begin():
            won = session.execute(self.evidence_sql, row).rowcount
            result = self.mutate(session, cid) if won else None
        self.committed()
        return result

    def inboxguard(self, cid: str) -> object:
        with (
            Session(self.engine) as session,
            session.begin(),
            self.inbox.guard(
                session, consumer=CONSUMER, command_id=cid, payload=self.body(cid)
            ) as entry,
        ):
            if not entry.duplicate:
                entry.result = self.mutate(session, cid)
        self.committed()
        return entry.result

    def redis_guard(self, cid: str) -> object:
        with (
            self.redis.pipeline() as pipe,
            self.redis_inbox.guard(
                pipe, consumer=CONSUMER, command_id=cid, payload=self.body(cid)
            ) as entry,
        ):
            if not entry.duplicate:
                with Session(self.engine) as session, session.begin():
                    result = self.mutate(session, cid)
                self.committed()  # PostgreSQL has committed; Redis's EXEC is still to come
                entry.result = result
        return entry.result

    def _powertools_handler(self) -> Callable[..., Any]:
        from aws_lambda_powertools.utilities.idempotency import (
            IdempotencyConfig,
            idempotent_function,
        )
        from aws_lambda_powertools.utilities.idempotency.persistence.cache import (
            CachePersistenceLayer,
        )

        client = redis.Redis.from_url(self.place.redis_url, decode_responses=True)
        layer = CachePersistenceLayer(client=client)
        expiry = {} if self.place.ttl is None else {"expires_after_seconds": self.place.ttl}
        config = IdempotencyConfig(
            event_key_jmespath="command_id",
            raise_on_no_idempotency_key=True,
            **expiry,
        )

        @idempotent_function(
            data_keyword_argument="command",
            persistence_store=layer,
            config=config,
            key_prefix=self.powertools_prefix,
        )
        def handle(command: dict[str, Any]) -> dict[str, str]:
            with Session(self.engine) as session, session.begin():
                result = self.mutate(session, command["command_id"])
            self.committed()  # before Powertools writes COMPLETED
            return result

        return handle

    @property
    def powertools_prefix(self) -> str:
        return f"{self.place.prefix}pt"

    def powertools(self, cid: str) -> object:
        if self._powertools is None:
            self._powertools = self._powertools_handler()
        return self._powertools(command=self.body(cid))

    def lock_key(self, cid: str) -> str:
        return f"{self.place.prefix}qo_credit_{cid}"

    def lock(self, cid: str) -> object:
        key = self.lock_key(cid)
        acquired = redis.lock.Lock(
            self.redis, key, timeout=self.lock_timeout, blocking=False
        ).acquire()
        if not acquired:
            raise AlreadyQueued(key)
        try:
            with Session(self.engine) as session, session.begin():
                result = self.mutate(session, cid)
            self.committed()  # the lock is still held
        finally:
            self.redis.delete(key)  # celery-once's clear_lock, run after the task returns
        return result

    # -- what the scenarios read ----------------------------------------------------------

    def applied(self, cid: str) -> int:
        """How many ledger rows the command has: the count that decides 'applied twice'."""
        with self.engine.connect() as conn:
            query = select(func.count()).where(self.ledger.c.command_id == cid)
            return int(conn.scalar(query.select_from(self.ledger)) or 0)

    def record(self, variant: str, cid: str) -> str:
        """What the variant's own store says of ``cid`` now."""
        probe = {
            "claim": self._claim_status,
            "inboxguard": self._inbox_status,
            "redis-inbox": self._redis_inbox_status,
            "powertools": self._powertools_status,
            "lock": self._lock_status,
        }.get(variant)
        return probe(cid) if probe else "none"

    def _claim_status(self, cid: str) -> str:
        query = text(f"SELECT 1 FROM {self.place.prefix}claims WHERE command_id = :c")
        with self.engine.connect() as conn:
            return "completed" if conn.execute(query, {"c": cid}).first() else "none"

    def _inbox_status(self, cid: str) -> str:
        return "completed" if self.inbox.lookup(CONSUMER, cid) else "none"

    def _redis_inbox_status(self, cid: str) -> str:
        if self.redis_inbox.lookup(CONSUMER, cid):
            return "completed"
        lease = self.redis_inbox.keys.command(CONSUMER, cid).lease
        return "lease held" if self.redis.exists(lease) else "none"

    def _lock_status(self, cid: str) -> str:
        return "lock held" if self.redis.exists(self.lock_key(cid)) else "none"

    def powertools_key(self, cid: str) -> str:
        """Powertools' key for ``cid``: ``key_prefix#`` and the MD5 of the JSON of
        the ``event_key_jmespath`` value (its ``_generate_hash``)."""
        digest = hashlib.md5(json.dumps(cid, sort_keys=True).encode()).hexdigest()
        return f"{self.powertools_prefix}#{digest}"

    def _powertools_status(self, cid: str) -> str:
        raw = self.redis.get(self.powertools_key(cid))
        if raw is None:
            return "none"
        status = str(json.loads(raw).get("status", "?"))
        return {"INPROGRESS": "in progress", "COMPLETED": "completed"}.get(status, status)

    def holds(self, variant: str, cid: str) -> bool:
        """Whether a record with a time to live still stands for ``cid``."""
        state = self.record(variant, cid)
        if variant == "powertools":
            return state != "none"
        return state in {"lease held", "lock held"}
