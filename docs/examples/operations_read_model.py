"""The operator read model from Python: stats, explain, release.

Run: python docs/examples/operations_read_model.py [SQLALCHEMY_URL]
(default: a temporary SQLite file; an in-memory database cannot keep
quarantine records, which are written on a connection of their own).
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard


def deliver(inbox: inboxguard.Inbox, payload: dict[str, int]) -> str:
    """Deliver command ``inv-1``; say what the inbox decided."""
    try:
        with Session(inbox.engine) as session, session.begin():
            with inbox.guard(
                session, consumer="billing", command_id="inv-1", payload=payload
            ) as entry:
                return "duplicate" if entry.duplicate else "processed"
    except inboxguard.PayloadMismatchError:
        return "quarantined"


def main(url: str) -> None:
    """Process, refuse, inspect, release and process again, on ``url``."""
    engine = create_engine(url)
    inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7), table_prefix="ops_")
    inbox.create_schema()
    try:
        assert deliver(inbox, {"amount": 10}) == "processed"
        assert deliver(inbox, {"amount": 12}) == "quarantined"  # same ID, other payload

        found = inboxguard.stats(engine, table_prefix="ops_")
        [billing] = found.consumers or ()
        print(f"{billing.consumer}: {billing.processed} processed, {billing.quarantined} open")

        why = inboxguard.explain(
            engine, consumer="billing", command_id="inv-1", table_prefix="ops_"
        )
        print(f"verdict {why.verdict}: {why.summary}")

        [record] = inboxguard.quarantine_list(engine, table_prefix="ops_")
        action = inboxguard.release_quarantine(
            engine,
            record.id,
            actor="ann",
            reason="the sender fixed the amount",
            table_prefix="ops_",
        )
        assert action is not None
        print(f"released by {action.actor} at {action.acted_at.isoformat()}: {action.reason}")
        assert deliver(inbox, {"amount": 12}) == "processed"  # the release let it run
        assert deliver(inbox, {"amount": 12}) == "duplicate"
    finally:
        inbox.drop_schema()
        engine.dispose()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(f"sqlite:///{Path(folder) / 'ops.db'}")
