"""check_schema() on a partitioned inbox: every partition, DEFAULT included,
carries its unique (consumer, command_id) index, and the DEFAULT partition
exists; each fault is refused naming the partition and the fix, and the
documented fix makes the inbox pass again."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

import inboxguard
from inboxguard.errors import ConfigurationError
from tests.conftest import FakeClock
from tests.inbox.partitioning.conftest import HORIZON, START, claim, partitions, where_rows

DAY = dt.timedelta(days=1)


def _execute(engine: Engine, *statements: str) -> None:
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))


def _insert_row(engine: Engine, table: str, command_id: str) -> None:
    """A row written straight into one partition, bypassing the claim."""
    expires = START + HORIZON
    with engine.begin() as conn:
        conn.execute(
            text(
                f'INSERT INTO "{table}" (consumer, command_id, digest, processed_at, expires_at)'
                " VALUES ('c', :id, 'd', :at, :exp)"
            ),
            {"id": command_id, "at": START.replace(tzinfo=None), "exp": expires},
        )


def test_a_healthy_partitioned_inbox_passes(pg_engine: Engine, pbox: inboxguard.Inbox) -> None:
    names = partitions(pg_engine, pbox)
    assert f"{pbox.tables.inbox.name}_default" in names
    pbox.check_schema()


def test_a_partition_whose_unique_index_was_dropped_is_refused_until_create_partitions(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    part = f"{pbox.tables.inbox.name}_p20260103"
    _execute(pg_engine, f'DROP INDEX "{part}_key"')
    # What the check guards against: the partition now stores a command twice.
    _insert_row(pg_engine, part, "dup")
    _insert_row(pg_engine, part, "dup")
    with pytest.raises(ConfigurationError, match="without their unique index") as refused:
        pbox.check_schema()
    assert part in str(refused.value)
    assert "create_partitions()" in str(refused.value)
    others = [p for p in partitions(pg_engine, pbox) if p != part]
    assert not any(other in str(refused.value) for other in others)

    # The fix cannot index a partition holding a duplicate, and says so.
    with pytest.raises(ConfigurationError, match="more than once") as duplicates:
        pbox.create_partitions()
    assert part in str(duplicates.value)
    _execute(pg_engine, f'DELETE FROM "{part}" WHERE ctid = (SELECT max(ctid) FROM "{part}")')

    assert pbox.create_partitions() == []
    pbox.check_schema()
    with pytest.raises(IntegrityError):
        _insert_row(pg_engine, part, "dup")


def test_the_default_partitions_missing_index_is_refused_and_create_schema_restores_it(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    default = f"{pbox.tables.inbox.name}_default"
    _execute(pg_engine, f'DROP INDEX "{default}_key"')
    with pytest.raises(ConfigurationError, match=default):
        pbox.check_schema()
    pbox.create_schema()
    pbox.check_schema()


def test_a_partition_attached_by_hand_without_the_index_is_refused(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    parent = pbox.tables.inbox.name
    manual = f"{parent}_manual"
    _execute(
        pg_engine,
        f'CREATE TABLE "{manual}" (LIKE "{parent}" INCLUDING DEFAULTS)',
        f'ALTER TABLE "{parent}" ATTACH PARTITION "{manual}"'
        " FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')",
    )
    with pytest.raises(ConfigurationError, match=manual):
        pbox.check_schema()
    pbox.create_partitions()
    pbox.check_schema()


def test_a_partition_attached_by_hand_with_its_own_unique_index_passes(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    parent = pbox.tables.inbox.name
    manual = f"{parent}_own"
    _execute(
        pg_engine,
        f'CREATE TABLE "{manual}" (LIKE "{parent}" INCLUDING DEFAULTS)',
        f'CREATE UNIQUE INDEX "{manual}_ids" ON "{manual}" (command_id, consumer)',
        f'ALTER TABLE "{parent}" ATTACH PARTITION "{manual}"'
        " FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')",
    )
    pbox.check_schema()


@pytest.mark.parametrize(
    "index_sql",
    [
        "CREATE INDEX {index} ON {part} (consumer, command_id)",
        "CREATE UNIQUE INDEX {index} ON {part} (consumer, command_id) WHERE digest <> ''",
        "CREATE UNIQUE INDEX {index} ON {part} (consumer, command_id, digest)",
    ],
    ids=["not-unique", "partial", "wider-key"],
)
def test_an_index_that_does_not_keep_a_command_once_is_not_taken_for_the_unique_one(
    pg_engine: Engine, pbox: inboxguard.Inbox, index_sql: str
) -> None:
    part = f"{pbox.tables.inbox.name}_p20260104"
    _execute(
        pg_engine,
        f'DROP INDEX "{part}_key"',
        index_sql.format(index=f'"{part}_other"', part=f'"{part}"'),
    )
    with pytest.raises(ConfigurationError, match=part):
        pbox.check_schema()


def test_a_missing_default_partition_is_refused_and_create_schema_recreates_it(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    default = f"{pbox.tables.inbox.name}_default"
    _execute(pg_engine, f'DROP TABLE "{default}"')
    with pytest.raises(ConfigurationError, match="no DEFAULT partition") as refused:
        pbox.check_schema()
    assert "create_schema()" in str(refused.value)
    # Why it is refused: a claim whose expiry no partition covers fails.
    day_clock.advance(10 * DAY)
    with pytest.raises(DBAPIError, match="no partition of relation"):
        claim(pg_engine, pbox, "late")

    pbox.create_schema()
    pbox.check_schema()
    day_clock.advance(10 * DAY)
    assert claim(pg_engine, pbox, "later")
    assert where_rows(pg_engine, pbox)["later"] == default


def test_a_detached_default_partition_is_refused_naming_the_attach(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    parent = pbox.tables.inbox.name
    default = f"{parent}_default"
    _execute(pg_engine, f'ALTER TABLE "{parent}" DETACH PARTITION "{default}"')
    with pytest.raises(ConfigurationError, match="ATTACH PARTITION") as refused:
        pbox.check_schema()
    attach = re.search(r"ALTER TABLE \S+ ATTACH PARTITION \S+ DEFAULT", str(refused.value))
    assert attach is not None
    _execute(pg_engine, attach.group(0))
    pbox.check_schema()


def test_a_tenant_schemas_partition_without_its_index_is_named_in_that_schema(
    pg_engine: Engine, prefix: str, day_clock: FakeClock
) -> None:
    schema = f"{prefix}tenant"
    _execute(pg_engine, f'CREATE SCHEMA "{schema}"')
    tenant = pg_engine.execution_options(schema_translate_map={None: schema})
    box = inboxguard.Inbox(
        tenant, retention=HORIZON, table_prefix=prefix, clock=day_clock, partitioning="daily"
    )
    part = f"{box.tables.inbox.name}_p20260102"
    try:
        box.create_schema()
        box.check_schema()
        _execute(pg_engine, f'DROP INDEX "{schema}"."{part}_key"')
        with pytest.raises(ConfigurationError, match=re.escape(f"{schema}.{part}")):
            box.check_schema()
        box.create_partitions()
        box.check_schema()
    finally:
        _execute(pg_engine, f'DROP SCHEMA "{schema}" CASCADE')


def test_another_table_as_the_default_partition_is_refused_naming_the_fix(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    parent = pbox.tables.inbox.name
    other = f"{parent}_other"
    _execute(
        pg_engine,
        f'DROP TABLE "{parent}_default"',
        f'CREATE TABLE "{other}" PARTITION OF "{parent}" DEFAULT',
        f'CREATE UNIQUE INDEX ON "{other}" (consumer, command_id)',
    )
    with pytest.raises(ConfigurationError, match="DETACH PARTITION") as refused:
        pbox.check_schema()
    assert other in str(refused.value)
    _execute(pg_engine, f'ALTER TABLE "{parent}" DETACH PARTITION "{other}"')
    pbox.create_schema()
    pbox.check_schema()


def test_an_invalid_index_left_by_a_failed_concurrent_build_is_refused_and_replaced(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    part = f"{pbox.tables.inbox.name}_p20260103"
    _execute(pg_engine, f'DROP INDEX "{part}_key"')
    _insert_row(pg_engine, part, "dup")
    _insert_row(pg_engine, part, "dup")
    with (
        pg_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
        pytest.raises(IntegrityError),
    ):
        conn.execute(
            text(
                f'CREATE UNIQUE INDEX CONCURRENTLY "{part}_key" ON "{part}" (consumer, command_id)'
            )
        )
    with pytest.raises(ConfigurationError, match=part):
        pbox.check_schema()
    _execute(pg_engine, f'DELETE FROM "{part}" WHERE ctid = (SELECT max(ctid) FROM "{part}")')

    pbox.create_partitions()
    pbox.check_schema()
    with pytest.raises(IntegrityError):
        _insert_row(pg_engine, part, "dup")
