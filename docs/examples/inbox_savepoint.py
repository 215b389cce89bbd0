"""A step that may fail goes in a savepoint; the claim and the rest survive it."""

import tempfile
from datetime import timedelta
from pathlib import Path

from sqlalchemy import String, create_engine, event, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import inboxguard

engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")


# pysqlite needs SQLAlchemy's recipe for savepoints (see "The transaction boundary").
@event.listens_for(engine, "connect")
def _no_driver_begin(dbapi_connection, _record):
    dbapi_connection.isolation_level = None


@event.listens_for(engine, "begin")
def _begin(conn):
    conn.exec_driver_sql("BEGIN")


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "customers"
    email: Mapped[str] = mapped_column(String(80), primary_key=True)


Base.metadata.create_all(engine)
inbox = inboxguard.Inbox(engine, retention=timedelta(days=7))
inbox.create_schema()


def sign_up(session: Session, cid: str, cmd: dict) -> None:
    # --8<-- [start:savepoint]
    with inbox.guard(session, consumer="c", command_id=cid, payload=cmd) as entry:
        try:
            with session.begin_nested():  # a savepoint: rolls back alone
                session.add(Customer(email=cmd["email"]))
        except IntegrityError:
            pass  # the customer exists; the claim and the rest are intact
        entry.result = {"signed_up": cmd["email"]}
    # --8<-- [end:savepoint]


with Session(engine) as session, session.begin():
    session.add(Customer(email="ada@example.com"))  # already a customer

with Session(engine) as session, session.begin():
    sign_up(session, "signup-1", {"email": "ada@example.com"})

assert inbox.lookup("c", "signup-1") is not None  # the claim committed
with Session(engine) as session:
    assert session.scalar(select(func.count()).select_from(Customer)) == 1
