"""DJ14: Django's database errors are classified where every database error is
(``inboxguard.sql.errors``): a lock timeout and a connection lost inside the
guarded block are retryable, and leave the block as themselves, not as the
"transaction ended inside the block" ConfigurationError. PostgreSQL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction
from django.db.utils import DatabaseError
from sqlalchemy import create_engine, text

import inboxguard
from inboxguard import ConfigurationError
from tests.conftest import unique
from tests.django.support import add_alias, close_all

pytestmark = pytest.mark.postgresql


@pytest.fixture
def pg_box(pg_url: str) -> Iterator[tuple[Any, str, str]]:
    from inboxguard.django import DjangoInbox

    alias = add_alias("postgresql", pg_url)
    box = DjangoInbox(
        database=alias, retention=dt.timedelta(days=1), table_prefix=unique("d") + "_"
    )
    box.create_schema()
    table = unique("locked")
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text(f'CREATE TABLE "{table}" (id int)'))
    yield box, alias, table
    close_all()
    with engine.begin() as conn:
        conn.execute(text(f'DROP TABLE "{table}"'))
    engine.dispose()
    box.drop_schema()
    box.engine.dispose()


def _run(box: Any, alias: str, body: Any) -> BaseException:
    with pytest.raises(Exception) as raised:  # noqa: PT011 - which one is the assertion
        with (
            transaction.atomic(using=alias),
            box.guard(consumer="c", command_id=unique("cmd"), payload={"n": 1}),
        ):
            body()
    return raised.value


def test_dj14_a_lock_timeout_in_the_block_is_retryable(
    pg_box: tuple[Any, str, str], pg_url: str
) -> None:
    box, alias, table = pg_box
    holder = create_engine(pg_url)
    with holder.connect() as other:
        other.execute(text(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE'))

        def body() -> None:
            with connections[alias].cursor() as cursor:
                cursor.execute("SET LOCAL lock_timeout = '100ms'")
                cursor.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')

        error = _run(box, alias, body)
        other.rollback()
    holder.dispose()
    assert isinstance(error, DatabaseError), repr(error)
    assert not isinstance(error, ConfigurationError)
    assert inboxguard.is_retryable(error)


def test_dj14_a_connection_lost_in_the_block_is_retryable(
    pg_box: tuple[Any, str, str], pg_url: str
) -> None:
    box, alias, _ = pg_box
    killer = create_engine(pg_url, isolation_level="AUTOCOMMIT")

    def body() -> None:
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
        with killer.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT 1")

    error = _run(box, alias, body)
    killer.dispose()
    assert isinstance(error, DatabaseError), repr(error)
    assert inboxguard.is_retryable(error)
