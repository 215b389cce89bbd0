"""Batch claims: a consumer that takes messages in batches claims each batch at once."""

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(engine, retention=timedelta(days=30))
inbox.create_schema()
invoices = Table("invoices", MetaData(), Column("id", String(20)), Column("cents", Integer))
invoices.metadata.create_all(engine)


# --8<-- [start:batch]
def charge_batch(messages: list[dict]) -> list[object]:
    """Handle one batch of messages in one transaction; one answer per message."""
    commands = [
        inboxguard.BatchCommand(
            m["command_id"], m["body"], sent_at=m["sent_at"], details={"offset": m["offset"]}
        )
        for m in messages
    ]  # or plain (command_id, payload) pairs, or {command_id: payload}
    with Session(engine) as session, session.begin():
        with inbox.guard_batch(
            session, consumer="billing.charge-invoice", commands=commands
        ) as batch:
            for entry in batch.fresh:  # claimed by this transaction: apply them
                body = entry.payload
                if body["cents"] <= 0:  # this one cannot be applied: give it back alone
                    entry.release()  # its claim is dropped; do not ack its message
                    continue
                session.execute(invoices.insert().values(id=body["invoice"], cents=body["cents"]))
                entry.result = {"charged": body["cents"]}  # stored at the block's exit
        # Every entry, in input order: ack duplicates and fresh ones after the
        # commit; dead-letter the refused ones (already quarantined).
        return [
            entry.error if entry.refused else "retry later" if entry.released else entry.result
            for entry in batch
        ]


# --8<-- [end:batch]

now = datetime.now(UTC)


def message(offset: int, invoice: str, cents: int, sent_at: datetime = now) -> dict:
    body = {"invoice": invoice, "cents": cents}
    return {"command_id": f"inv-{invoice}", "body": body, "sent_at": sent_at, "offset": offset}


first = charge_batch([message(0, "1", 100), message(1, "2", 200)])
assert first == [{"charged": 100}, {"charged": 200}]
# A redelivered batch: inv-1 again (a duplicate with its stored result), inv-2
# with another amount (refused and quarantined), inv-3 new, and a message sent
# before the evidence horizon (refused alone), and inv-5 that cannot be applied
# (released): one batch, five answers.
again = charge_batch(
    [
        message(2, "1", 100),
        message(3, "2", 999),
        message(4, "3", 300),
        message(5, "4", 400, sent_at=now - timedelta(days=90)),
        message(6, "5", 0),
    ]
)
assert again[4] == "retry later"  # released: inv-5 left no evidence
assert inbox.lookup("billing.charge-invoice", "inv-5") is None
assert again[0] == {"charged": 100}
assert isinstance(again[1], inboxguard.PayloadMismatchError)
assert again[2] == {"charged": 300}
assert isinstance(again[3], inboxguard.BeyondRetentionError)
with Session(engine) as session:
    assert session.scalar(select(func.count()).select_from(invoices)) == 3
assert sorted(r.command_id for r in inbox.quarantined()) == ["inv-2", "inv-4"]
