"""The evidence partitioned by expiry: partitions created ahead, claims in the
partition of their expiry (or the DEFAULT one), purge dropping only whole
expired partitions, and every misconfiguration refused."""

from __future__ import annotations

import asyncio
import datetime as dt
import subprocess
import sys
import threading

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine

import inboxguard
from inboxguard.errors import ConfigurationError, PayloadMismatchError
from tests.conftest import FakeClock
from tests.inbox.partitioning.conftest import HORIZON, claim, partitions, where_rows

DAY = dt.timedelta(days=1)


def test_create_schema_and_create_partitions_make_partitions_ahead(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    name = pbox.tables.inbox.name
    # From today to three days past the expiry of a claim made now (Jan 3).
    days = [f"{name}_p202601{d:02d}" for d in range(1, 7)]
    assert partitions(pg_engine, pbox) == sorted([*days, f"{name}_default"])
    assert pbox.create_partitions() == []  # idempotent
    day_clock.advance(DAY)
    assert pbox.create_partitions() == [f"{name}_p20260107"]
    assert pbox.create_partitions(ahead=5) == [f"{name}_p20260108", f"{name}_p20260109"]
    pbox.check_schema()


def test_claim_lands_in_the_partition_of_its_expiry(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    name = pbox.tables.inbox.name
    assert claim(pg_engine, pbox, "a")
    day_clock.advance(DAY / 2)  # past midnight: the expiry is a day later
    assert claim(pg_engine, pbox, "b")
    assert where_rows(pg_engine, pbox) == {"a": f"{name}_p20260103", "b": f"{name}_p20260104"}


def test_claim_without_a_partition_lands_in_default_then_moves_with_its_duplicate_kept(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    name = pbox.tables.inbox.name
    day_clock.advance(20 * DAY)  # no maintenance for 20 days
    assert claim(pg_engine, pbox, "late")
    assert where_rows(pg_engine, pbox) == {"late": f"{name}_default"}
    assert not claim(pg_engine, pbox, "late")  # a duplicate even there
    created = pbox.create_partitions()
    assert f"{name}_p20260123" in created
    assert where_rows(pg_engine, pbox) == {"late": f"{name}_p20260123"}
    assert not claim(pg_engine, pbox, "late")


def test_duplicate_after_a_day_boundary_is_a_duplicate(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    assert claim(pg_engine, pbox, "x")
    day_clock.advance(DAY)
    assert not claim(pg_engine, pbox, "x")
    day_clock.advance(DAY / 2)
    with pytest.raises(PayloadMismatchError):
        claim(pg_engine, pbox, "x", payload=2)
    assert len(where_rows(pg_engine, pbox)) == 1


def test_purge_drops_only_fully_expired_partitions(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    name = pbox.tables.inbox.name
    for day in range(4):  # expiries Jan 3..6 at noon
        assert claim(pg_engine, pbox, f"d{day}")
        day_clock.advance(DAY)
    # Now Jan 5 noon: Jan 3 and Jan 4 partitions are over, d0 and d1 expired;
    # d2 expires at Jan 5 noon (expired, but its partition runs to midnight).
    day_clock.advance(dt.timedelta(minutes=1))
    report = pbox.purge()
    assert report.partitions_dropped == (
        f"{name}_p20260101",
        f"{name}_p20260102",
        f"{name}_p20260103",
        f"{name}_p20260104",
    )
    assert report.deleted == 0  # nothing deleted row by row
    assert set(where_rows(pg_engine, pbox)) == {"d2", "d3"}
    assert f"{name}_p20260105" in partitions(pg_engine, pbox)
    # A purge at an instant before the partition's end leaves it whole.
    assert pbox.purge().partitions_dropped == ()
    assert set(where_rows(pg_engine, pbox)) == {"d2", "d3"}


def test_purge_never_drops_a_partition_an_open_quarantine_record_names(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    name = pbox.tables.inbox.name
    assert claim(pg_engine, pbox, "q")
    with pytest.raises(PayloadMismatchError):
        claim(pg_engine, pbox, "q", payload="other")
    assert claim(pg_engine, pbox, "free")
    day_clock.advance(5 * DAY)
    report = pbox.purge()
    assert report.partitions_kept == (f"{name}_p20260103",)
    assert set(where_rows(pg_engine, pbox)) == {"q", "free"}  # kept whole
    [record] = pbox.quarantined()
    assert pbox.resolve_quarantine(record.id)
    report = pbox.purge()
    assert report.partitions_dropped == (f"{name}_p20260103",)
    assert where_rows(pg_engine, pbox) == {}


def test_purge_with_a_now_inside_the_horizon_drops_nothing_unexpired(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    assert claim(pg_engine, pbox, "keep")  # expires Jan 3 noon
    report = pbox.purge(now=dt.datetime(2026, 1, 3, 11, 59, tzinfo=dt.UTC))
    assert report.partitions_dropped[-1:] == (f"{pbox.tables.inbox.name}_p20260102",)
    assert set(where_rows(pg_engine, pbox)) == {"keep"}


def test_purge_plan_counts_rows_in_droppable_partitions(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    for i in range(3):
        assert claim(pg_engine, pbox, f"p{i}")
    day_clock.advance(3 * DAY)
    assert pbox.purge_plan().expired == 3
    assert pbox.purge().partitions_dropped
    assert pbox.purge_plan().expired == 0


def test_repeatable_read_is_refused_and_nothing_is_claimed(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    for level in ("REPEATABLE READ", "SERIALIZABLE"):
        with pg_engine.connect() as conn:
            conn.execution_options(isolation_level=level)
            with (
                pytest.raises(ConfigurationError, match="READ COMMITTED"),
                pbox.guard(conn, consumer="c", command_id="rr", payload=1),
            ):
                pytest.fail("the block must not run")
            conn.rollback()
    assert where_rows(pg_engine, pbox) == {}
    assert claim(pg_engine, pbox, "rr")


@pytest.mark.parametrize("value", ["hourly", "Daily", 1, True])
def test_a_wrong_partitioning_value_names_the_field(pg_engine: Engine, value: object) -> None:
    with pytest.raises(ConfigurationError, match="partitioning must be one of"):
        inboxguard.Inbox(pg_engine, retention=HORIZON, partitioning=value)  # type: ignore[arg-type]


def test_partitioning_on_another_database_is_refused(tmp_path: object) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/p.db")
    with pytest.raises(ConfigurationError, match="PostgreSQL only"):
        inboxguard.Inbox(engine, retention=HORIZON, partitioning="daily")


def test_a_prefix_too_long_for_partition_names_is_refused(pg_engine: Engine) -> None:
    with pytest.raises(ConfigurationError, match="too long for partitioning"):
        inboxguard.Inbox(
            pg_engine, retention=HORIZON, table_prefix="p" * 45 + "_", partitioning="weekly"
        )


def test_layout_mismatches_are_refused_naming_the_fix(pg_engine: Engine, prefix: str) -> None:
    plain = inboxguard.Inbox(pg_engine, retention=HORIZON, table_prefix=prefix)
    plain.create_schema()
    try:
        parted = inboxguard.Inbox(
            pg_engine, retention=HORIZON, table_prefix=prefix, partitioning="daily"
        )
        with pytest.raises(ConfigurationError, match="Moving an existing inbox"):
            parted.create_schema()
        with pytest.raises(ConfigurationError, match="not partitioned"):
            parted.check_schema()
        with pytest.raises(ConfigurationError, match="needs Inbox"):
            plain.create_partitions()
    finally:
        plain.drop_schema()
    parted.create_schema()
    try:
        with pytest.raises(ConfigurationError, match="is partitioned by expiry"):
            plain.check_schema()
    finally:
        parted.drop_schema()


def test_weekly_and_monthly_partitions_start_on_monday_and_the_first(
    pg_engine: Engine, prefix: str, day_clock: FakeClock
) -> None:
    for granularity, first in (("weekly", "p20251229"), ("monthly", "p20260101")):
        box = inboxguard.Inbox(
            pg_engine,
            retention=dt.timedelta(days=40),
            table_prefix=f"{prefix}{granularity[0]}",
            clock=day_clock,
            partitioning=granularity,  # type: ignore[arg-type]
        )
        box.create_schema()
        try:
            names = [n for n in partitions(pg_engine, box) if not n.endswith("_default")]
            assert names[0] == f"{box.tables.inbox.name}_{first}"
            assert claim(pg_engine, box, "w")
            assert not claim(pg_engine, box, "w")
        finally:
            box.drop_schema()


def test_cli_purge_drops_partitions_and_refuses_a_partitioned_table_without_the_flag(
    pg_url: str, pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    assert claim(pg_engine, pbox, "old")
    prefix = pbox.table_prefix
    plain = _cli("purge", "--url", pg_url, "--prefix", prefix)
    assert plain.returncode != 0
    assert "--partitioning" in plain.stderr
    half = _cli("purge", "--url", pg_url, "--prefix", prefix, "--partitioning", "daily")
    assert half.returncode != 0
    assert "--horizon" in half.stderr
    # The row expires Jan 3; the command line runs at the real time, long after.
    done = _cli(
        "purge", "--url", pg_url, "--prefix", prefix, "--partitioning", "daily", "--horizon", "2d"
    )
    assert done.returncode == 0, done.stderr
    assert "dropped" in done.stdout
    assert where_rows(pg_engine, pbox) == {}
    assert f"{pbox.tables.inbox.name}_p20260103" not in partitions(pg_engine, pbox)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inboxguard", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_guard_async_on_asyncpg_claims_once_across_partitions(
    pg_url: str, pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    async def main() -> list[bool]:
        aengine = create_async_engine(pg_url.replace("postgresql+psycopg", "postgresql+asyncpg"))
        seen = []
        try:
            for _ in range(2):
                async with (
                    AsyncSession(aengine) as session,
                    session.begin(),
                    pbox.guard_async(session, consumer="c", command_id="a1", payload=1) as entry,
                ):
                    seen.append(entry.duplicate)
                day_clock.advance(DAY)
        finally:
            await aengine.dispose()
        return seen

    assert asyncio.run(main()) == [False, True]
    assert list(where_rows(pg_engine, pbox)) == ["a1"]


def test_concurrent_create_partitions_create_each_partition_once(
    pg_engine: Engine, pbox: inboxguard.Inbox, day_clock: FakeClock
) -> None:
    day_clock.advance(10 * DAY)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def create() -> None:
        try:
            results.append(pbox.create_partitions())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=create) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    created = [name for names in results for name in names]
    assert len(created) == len(set(created))
    # Whatever a busy call skipped, the next call creates.
    pbox.create_partitions()
    name = pbox.tables.inbox.name
    expected = {f"{name}_p202601{d:02d}" for d in range(11, 17)}
    assert expected <= set(partitions(pg_engine, pbox))


def test_a_claim_without_lock_timeout_still_locks_and_claims_once(
    pg_engine: Engine, prefix: str, day_clock: FakeClock
) -> None:
    box = inboxguard.Inbox(
        pg_engine,
        retention=HORIZON,
        table_prefix=prefix,
        clock=day_clock,
        lock_timeout=None,
        partitioning="monthly",
    )
    box.create_schema()
    try:
        assert claim(pg_engine, box, "n")
        day_clock.advance(40 * DAY)
        assert not claim(pg_engine, box, "n")
    finally:
        box.drop_schema()


def test_a_schema_per_tenant_keeps_partitions_in_the_tenant_schema(
    pg_engine: Engine, prefix: str, day_clock: FakeClock
) -> None:
    schema = f"{prefix}tenant"
    with pg_engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    tenant = pg_engine.execution_options(schema_translate_map={None: schema})
    box = inboxguard.Inbox(
        tenant, retention=HORIZON, table_prefix=prefix, clock=day_clock, partitioning="daily"
    )
    try:
        box.create_schema()
        box.check_schema()
        assert claim(tenant, box, "t")
        day_clock.advance(5 * DAY)
        assert box.purge().partitions_dropped
        with pg_engine.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM pg_tables WHERE schemaname = :s AND tablename LIKE :p"),
                {"s": schema, "p": f"{prefix}inbox_p%"},
            ).scalar_one()
            public = conn.execute(
                text("SELECT count(*) FROM pg_tables WHERE tablename LIKE :p AND schemaname <> :s"),
                {"s": schema, "p": f"{prefix}inbox%"},
            ).scalar_one()
        assert found > 0
        assert public == 0
    finally:
        with pg_engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


def test_guard_batch_on_a_partitioned_inbox_is_refused_before_anything_is_claimed(
    pg_engine: Engine, pbox: inboxguard.Inbox
) -> None:
    with pg_engine.connect() as conn:
        conn.begin()
        with (
            pytest.raises(ConfigurationError, match="guard_batch"),
            pbox.guard_batch(conn, consumer="c", commands=[("b1", 1), ("b2", 2)]),
        ):
            pytest.fail("the block must not run")
        conn.rollback()
    assert where_rows(pg_engine, pbox) == {}
