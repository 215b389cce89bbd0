"""A partitioned inbox: the settings, the maintenance call, and the refusal
on a database that cannot partition (this script runs on SQLite)."""

import tempfile
from pathlib import Path

from sqlalchemy import create_engine

database = Path(tempfile.mkdtemp()) / "app.db"

# --8<-- [start:inbox]
from datetime import timedelta

import inboxguard


def make_inbox(engine):
    """PostgreSQL: evidence kept 30 days, in one partition per day of expiry."""
    return inboxguard.Inbox(
        engine,  # create_engine("postgresql+psycopg://...")
        retention=timedelta(days=30),
        partitioning="daily",  # or "weekly", "monthly"
    )


def maintenance(inbox):
    """Run at least once a day (cron, a beat task): creates the partitions
    ahead, drops the expired ones whole, deletes the DEFAULT partition's
    expired rows one by one."""
    report = inbox.purge()
    print(report.summary())
    return report


# --8<-- [end:inbox]

# --8<-- [start:refused]
try:
    make_inbox(create_engine(f"sqlite:///{database}"))
except inboxguard.ConfigurationError as error:
    assert "PostgreSQL only" in str(error)
    print(error)
else:
    raise SystemExit("partitioning on SQLite must be refused")
# --8<-- [end:refused]
