"""The demo's consequential handler: charge an invoice at a payment provider,
then record the charge, once per command."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard._core.guarantee import Guarantee
from inboxguard._core.retention import RetentionPolicy
from inboxguard.effects import EffectLedger
from inboxguard.errors import PayloadConflictError
from inboxguard.inbox import Inbox, QuarantineReason
from inboxguard.testing._clock import ManualClock
from inboxguard.testing._provider import FakeProvider

__all__ = ["CONSUMER", "LEASE", "RETENTION", "Billing"]

CONSUMER = "billing.charge-invoice"
#: The lease of each provider call (a crashed worker's effect is taken over after it).
LEASE = dt.timedelta(seconds=30)
#: How long the inbox keeps evidence: redeliveries within a day, dead-letter replays a week.
RETENTION = RetentionPolicy(
    redelivery=dt.timedelta(days=1), dead_letter_replay=dt.timedelta(days=7)
)


@dataclass
class Billing:
    """One scenario's world: an inbox, a ledger, a provider and the app's table,
    all on one clock."""

    engine: Engine
    prefix: str
    clock: ManualClock
    provider: FakeProvider

    def __post_init__(self) -> None:
        self.inbox = Inbox(
            self.engine, retention=RETENTION, table_prefix=self.prefix, clock=self.clock
        )
        self.ledger = EffectLedger(
            self.engine, table_prefix=self.prefix, clock=self.clock, actor="demo"
        )
        self.charges = Table(
            f"{self.prefix}charges",
            MetaData(),
            Column("id", Integer, primary_key=True),
            Column("command_id", String(255), nullable=False),
            Column("reference", String(255), nullable=False),
        )
        #: The guarded step, listed by ``inboxguard.guarantees_of(self.inbox)``
        #: with what only the demo knows declared and the rest derived.
        self.record = self.inbox.handler(
            consumer=CONSUMER,
            command_id="command_id",
            exclude=("kwargs.reference", "kwargs.sent_at"),
            sent_at="sent_at",
            guarantee=Guarantee(
                provider=self.provider,
                ledger=self.ledger,
                delivery_mode=(
                    "at least once: a worker acks after the handler returns; a delivery that"
                    " raised goes back to the broker and is delivered again"
                ),
                compensation="a refund at the provider, issued by an operator",
            ),
        )(self._record)
        self.inbox.create_schema()
        self.ledger.create_schema()
        self.charges.metadata.create_all(self.engine)

    def drop(self) -> None:
        """Drop every table of this scenario."""
        self.charges.metadata.drop_all(self.engine)
        self.ledger.drop_schema()
        self.inbox.drop_schema()

    def charge(self, message: dict[str, Any]) -> dict[str, Any]:
        """Charge ``message['amount']`` for ``message['invoice']``.

        The provider call goes first, through the ledger, keyed by the
        invoice (on SQLite it cannot run inside the guard's write
        transaction); the guarded :attr:`record` then records the charge
        once, refusing a replay older than the evidence horizon. A payload
        that conflicts with the first one is quarantined for an operator.
        """
        command_id = f"invoice-{message['invoice']}/charge"
        effect = {"invoice": message["invoice"], "amount": message["amount"]}
        sent_at = message.get("sent_at")
        try:
            receipt = self.ledger.execute(command_id, self.provider, effect, lease=LEASE)
        except PayloadConflictError:
            self.inbox.quarantine_delivery(
                consumer=CONSUMER,
                command_id=command_id,
                payload=message,
                reason=QuarantineReason.PAYLOAD_MISMATCH,
            )
            raise
        with Session(self.engine) as session, session.begin():
            return self.record(
                session,
                command_id,
                message["invoice"],
                message["amount"],
                reference=receipt.reference,
                sent_at=None if sent_at is None else dt.datetime.fromisoformat(sent_at),
            )

    def _record(
        self,
        session: Session,
        command_id: str,
        invoice: int,
        amount: int,
        *,
        reference: str,
        sent_at: dt.datetime | None,
    ) -> dict[str, Any]:
        """Record the charge of ``amount`` for ``invoice``: runs once per
        command (``self.record`` guards it)."""
        session.execute(self.charges.insert().values(command_id=command_id, reference=reference))
        return {"reference": reference}

    def charge_rows(self) -> int:
        """Rows in the app's own table (a double application shows as two)."""
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self.charges)).scalar_one())
