"""A sandbox payment gateway: a provider whose every request is a database row.

It behaves like a real idempotent API, and can be made to misbehave:

* it remembers each idempotency key for ``window`` (a replay with the same
  key inside it returns the first charge; a different payload is refused),
  and FORGETS the key afterwards: a late re-send charges again, exactly the
  duplicate the ledger must never cause;
* ``script`` queues behaviours for the next sends: ``"ok"``,
  ``"accept_then_timeout"`` (charges, then raises ``TimeoutError`` as if the
  response were lost), ``"timeout"`` (raises before the request arrives),
  ``"connection_error"`` and ``"reject"``;
* ``after_apply`` runs between charging and answering (tests block a worker
  there, or kill it);
* ``lookup`` finds a charge by its key at any age (like a search on a metadata
  field), when ``supports_lookup`` is true.

Requests, charges and keys live in tables, so counts are exact across
processes: ``requests()`` counts requests that reached the gateway and
``charges()`` counts effects actually applied.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from inboxguard import (
    MismatchBehaviour,
    ProviderContract,
    ProviderRejectedError,
    Receipt,
    digest_of,
)
from inboxguard._core.clock import Clock, checked_now, utc_now
from inboxguard.sql.types import UtcDateTime

BEHAVIOURS = ("ok", "accept_then_timeout", "timeout", "connection_error", "reject")


class FileClock:
    """A clock shared by processes: the ISO time written in a file (real time
    while the file is missing)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __call__(self) -> dt.datetime:
        try:
            return dt.datetime.fromisoformat(self.path.read_text().strip())
        except FileNotFoundError:
            return utc_now()

    def set(self, when: dt.datetime) -> None:
        """Move the shared time (atomically, by rename)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(when.isoformat())
        tmp.replace(self.path)


class SandboxGateway:
    """A fake payment provider with a real idempotency contract (see module doc)."""

    def __init__(
        self,
        engine: Engine,
        *,
        table_prefix: str,
        window: dt.timedelta | None = dt.timedelta(hours=24),
        supports_lookup: bool = True,
        clock: Clock | None = None,
        name: str = "sandbox",
    ) -> None:
        self.engine = engine
        self.clock: Clock = clock or utc_now
        self.window = window
        self.contract = ProviderContract(
            name=name,
            idempotency_window=window,
            supports_lookup=supports_lookup,
            on_mismatch=MismatchBehaviour.REJECT,
            source="integrations/ledger/gateway.py",
        )
        self.script: list[str] = []
        self.after_apply: Callable[[str], None] | None = None
        meta = MetaData()
        self.requests_t = Table(
            f"{table_prefix}gw_requests",
            meta,
            Column("id", Integer, primary_key=True, autoincrement=True),
            Column("idem_key", String(255), nullable=False),
            Column("kind", String(16), nullable=False),
            Column("at", UtcDateTime(), nullable=False),
        )
        self.charges_t = Table(
            f"{table_prefix}gw_charges",
            meta,
            Column("id", Integer, primary_key=True, autoincrement=True),
            Column("idem_key", String(255), nullable=False),
            Column("payload", Text, nullable=False),
            Column("at", UtcDateTime(), nullable=False),
        )
        self.keys_t = Table(
            f"{table_prefix}gw_keys",
            meta,
            Column("idem_key", String(255), primary_key=True),
            Column("charge_id", Integer, nullable=False),
            Column("digest", String(80), nullable=False),
            Column("first_at", UtcDateTime(), nullable=False),
        )
        self.metadata = meta

    def create_schema(self) -> None:
        """Create the gateway's tables (idempotent)."""
        self.metadata.create_all(self.engine)

    def drop_schema(self) -> None:
        """Drop the gateway's tables."""
        self.metadata.drop_all(self.engine)

    # -- the Provider protocol ------------------------------------------------------------

    def send(self, idempotency_key: str, payload: Any) -> Receipt:
        """Charge once per key while the key is remembered."""
        behaviour = self.script.pop(0) if self.script else "ok"
        if behaviour not in BEHAVIOURS:
            msg = f"unknown behaviour {behaviour!r}; choose from {BEHAVIOURS}"
            raise ValueError(msg)
        if behaviour == "timeout":
            raise TimeoutError("read timed out before the gateway received the request")
        if behaviour == "connection_error":
            raise ConnectionError("connection reset before the request was sent")
        now = checked_now(self.clock)
        self._log(idempotency_key, "send", now)
        if behaviour == "reject":
            raise ProviderRejectedError("card declined", reason="card_declined")
        charge_id = self._apply(idempotency_key, payload, now)
        if self.after_apply is not None:
            self.after_apply(idempotency_key)
        if behaviour == "accept_then_timeout":
            raise TimeoutError("the charge was made but the response was lost")
        return Receipt(f"ch_{charge_id}", {"idempotency_key": idempotency_key})

    def lookup(self, idempotency_key: str) -> Receipt | None:
        """The newest charge made with this key, at any age."""
        if not self.contract.supports_lookup:
            msg = "this gateway has no lookup (contract.supports_lookup is false)"
            raise NotImplementedError(msg)
        self._log(idempotency_key, "lookup", checked_now(self.clock))
        c = self.charges_t
        stmt = select(func.max(c.c.id)).where(c.c.idem_key == idempotency_key)
        with self.engine.connect() as conn:
            charge_id = conn.execute(stmt).scalar()
        if charge_id is None:
            return None
        return Receipt(f"ch_{charge_id}", {"idempotency_key": idempotency_key})

    # -- what tests count -----------------------------------------------------------------

    def requests(self, kind: str = "send", key: str | None = None) -> int:
        """Requests of ``kind`` that reached the gateway (optionally for one key)."""
        r = self.requests_t
        stmt = select(func.count()).select_from(r).where(r.c.kind == kind)
        if key is not None:
            stmt = stmt.where(r.c.idem_key == key)
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    def charges(self, key: str | None = None) -> int:
        """Effects actually applied (optionally for one key)."""
        c = self.charges_t
        stmt = select(func.count()).select_from(c)
        if key is not None:
            stmt = stmt.where(c.c.idem_key == key)
        with self.engine.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    # -- internals ------------------------------------------------------------------------

    def _log(self, key: str, kind: str, now: dt.datetime) -> None:
        with self.engine.begin() as conn:
            conn.execute(insert(self.requests_t).values(idem_key=key, kind=kind, at=now))

    def _apply(self, key: str, payload: Any, now: dt.datetime) -> int:
        digest = digest_of(payload)
        body = json.dumps(payload, sort_keys=True, default=str)
        try:
            with self.engine.begin() as conn:
                charge_id = self._charge(conn, key, body, now)
                conn.execute(
                    insert(self.keys_t).values(
                        idem_key=key, charge_id=charge_id, digest=digest, first_at=now
                    )
                )
                return charge_id
        except IntegrityError:
            pass
        k = self.keys_t
        with self.engine.begin() as conn:
            row = conn.execute(select(k).where(k.c.idem_key == key)).one()
            remembered = self.contract.remembers(row.first_at, now)
            if remembered:
                if row.digest != digest:
                    msg = "Idempotency-Key reused with different parameters"
                    raise ProviderRejectedError(msg, reason="idempotency_error")
                return int(row.charge_id)
            # The key was forgotten: this is a brand-new request, and a new charge.
            charge_id = self._charge(conn, key, body, now)
            conn.execute(
                update(k)
                .where(k.c.idem_key == key, k.c.first_at == row.first_at)
                .values(charge_id=charge_id, digest=digest, first_at=now)
            )
            return charge_id

    def _charge(self, conn: Any, key: str, body: str, now: dt.datetime) -> int:
        result = conn.execute(insert(self.charges_t).values(idem_key=key, payload=body, at=now))
        return int(result.inserted_primary_key[0])
