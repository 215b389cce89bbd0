"""The inbox's setup and the guard with every option, on a SQLite file."""

import tempfile

# --8<-- [start:setup]
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.orm import Session

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
# production: create_engine("postgresql+psycopg://app@db/app")
inbox = inboxguard.Inbox(
    engine,
    retention=inboxguard.RetentionPolicy(
        redelivery=timedelta(hours=1),
        dead_letter_replay=timedelta(days=30),
    ),
    table_prefix="inboxguard_",  # default
    lock_timeout=timedelta(seconds=5),  # default; None leaves the server's setting
)
inbox.create_schema()  # idempotent; or use the Alembic revisions (migrations.md)
# --8<-- [end:setup]

invoices = Table("invoices", MetaData(), Column("id", String(20)), Column("cents", Integer))
invoices.metadata.create_all(engine)


# --8<-- [start:guard]
def charge(cmd: dict, sent_at: datetime, headers: dict) -> dict:
    with Session(engine) as session, session.begin():
        with inbox.guard(
            session,
            consumer="billing.charge-invoice",
            command_id=cmd["command_id"],
            payload=cmd,
            exclude=("trace_id",),  # not part of the command: left out of the digest
            sent_at=sent_at,  # when the producer sent it (the retention check)
            details={"headers": headers},  # kept with a quarantine record
        ) as entry:
            if entry.duplicate:
                return entry.result  # the first run's result
            session.execute(invoices.insert().values(id=cmd["invoice"], cents=cmd["cents"]))
            entry.result = {"charged": cmd["cents"]}  # stored when the block exits normally
            return entry.result


# --8<-- [end:guard]

command = {"command_id": "inv-7", "invoice": "7", "cents": 4200, "trace_id": "a"}
now = datetime.now(UTC)
assert charge(command, now, {}) == {"charged": 4200}
# A redelivery with another trace ID is the same command: skipped.
assert charge({**command, "trace_id": "b"}, now, {}) == {"charged": 4200}
# Same command ID, other amount: refused before the body runs, and quarantined.
try:
    charge({**command, "cents": 9900}, now, {"x-origin": "replay"})
except inboxguard.PayloadMismatchError as exc:
    assert exc.command_id == "inv-7"
else:
    raise AssertionError("a changed payload must be refused")
with Session(engine) as session:
    assert session.scalar(select(func.count()).select_from(invoices)) == 1
[record] = inbox.quarantined()
assert record.details == {"headers": {"x-origin": "replay"}}
