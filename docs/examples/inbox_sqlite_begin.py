"""SQLAlchemy's SQLite recipe: the driver stays in autocommit, the engine emits BEGIN."""

import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.orm import Session

import inboxguard

database = Path(tempfile.mkdtemp()) / "app.db"
# --8<-- [start:recipe]
engine = create_engine(f"sqlite:///{database}")


@event.listens_for(engine, "connect")
def _no_driver_begin(dbapi_connection, _record):
    dbapi_connection.isolation_level = None


@event.listens_for(engine, "begin")
def _begin(conn):
    conn.exec_driver_sql("BEGIN")


# --8<-- [end:recipe]

inbox = inboxguard.Inbox(engine, retention=timedelta(days=1))
inbox.create_schema()
with Session(engine) as session, session.begin():  # accepted: a real transaction
    with inbox.guard(session, consumer="c", command_id="1", payload={}) as entry:
        assert not entry.duplicate

# The same driver mode WITHOUT the begin event commits each statement: refused.
bare = create_engine(f"sqlite:///{database}", isolation_level="AUTOCOMMIT")
with Session(bare) as session, session.begin():
    try:
        with inbox.guard(session, consumer="c", command_id="2", payload={}):
            pass
    except inboxguard.ConfigurationError:
        pass
    else:
        raise AssertionError("autocommit must be refused")
