"""G13: a schema per tenant (``schema_translate_map``) reaches every statement.

Each test runs on PostgreSQL (two schemas), MariaDB (two databases, which
MariaDB calls schemas) and SQLite (two attached database files). The same
command IDs are guarded in both tenants through one ``Inbox``; each tenant
applies each command once, in its own schema, and nothing lands in the
default schema.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from inboxguard import EffectLedger, EffectState, Inbox, Outbox, PayloadMismatchError
from inboxguard.outbox import Dispatcher
from integrations.ledger.gateway import SandboxGateway
from tests.conftest import FakeClock, unique

RETENTION = dt.timedelta(days=30)


@dataclass
class Tenants:
    """One engine on a database holding two tenant schemas."""

    engine: Engine
    names: tuple[str, str]

    def conn_of(self, engine: Engine, tenant: str) -> Any:
        return engine.connect().execution_options(schema_translate_map={None: tenant})

    def engine_of(self, tenant: str) -> Engine:
        return self.engine.execution_options(schema_translate_map={None: tenant})


def _pg(url: str) -> Iterator[Tenants]:
    names = (unique("ta"), unique("tb"))
    engine = create_engine(url)
    with engine.begin() as conn:
        for name in names:
            conn.execute(text(f'CREATE SCHEMA "{name}"'))
    yield Tenants(engine, names)
    with engine.begin() as conn:
        for name in names:
            conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
    engine.dispose()


def _mysql(url: str) -> Iterator[Tenants]:
    names = (unique("ta"), unique("tb"))
    engine = create_engine(url)
    with engine.begin() as conn:
        for name in names:
            conn.execute(text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    yield Tenants(engine, names)
    with engine.begin() as conn:
        for name in names:
            conn.execute(text(f"DROP DATABASE `{name}`"))
    engine.dispose()


def _sqlite(directory: Path) -> Iterator[Tenants]:
    names = ("tenant_a", "tenant_b")
    engine = create_engine(f"sqlite:///{directory}/main.db")

    @event.listens_for(engine, "connect")
    def attach(dbapi_conn: Any, record: Any) -> None:
        for name in names:
            dbapi_conn.execute(f"ATTACH DATABASE ? AS {name}", (str(directory / f"{name}.db"),))

    yield Tenants(engine, names)
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def tenants(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Tenants]:
    """Two tenant schemas on each supported database."""
    if request.param == "sqlite":
        yield from _sqlite(tmp_path)
    elif request.param == "postgresql":
        yield from _pg(str(request.getfixturevalue("pg_url")))
    else:
        yield from _mysql(str(request.getfixturevalue("mysql_url")))


def _inboxes(tenants: Tenants, prefix: str, clock: FakeClock) -> dict[str | None, Inbox]:
    """An inbox per tenant (and one on the default schema), tables created."""
    boxes: dict[str | None, Inbox] = {}
    for tenant in (None, *tenants.names):
        engine = tenants.engine if tenant is None else tenants.engine_of(tenant)
        boxes[tenant] = Inbox(engine, retention=RETENTION, table_prefix=prefix, clock=clock)
        boxes[tenant].create_schema()
    return boxes


def _deliver(inbox: Inbox, conn: Connection, command_id: str, payload: object) -> bool:
    """Guard one delivery on ``conn``; True when the block applied it."""
    with conn.begin():
        with inbox.guard(conn, consumer="billing", command_id=command_id, payload=payload) as e:
            if e.duplicate:
                return False
            e.result = {"tenant": conn.get_execution_options()["schema_translate_map"][None]}
            return True


def test_g13_same_command_ids_are_applied_once_per_tenant(
    tenants: Tenants, prefix: str, clock: FakeClock
) -> None:
    """Tenant B's first ``invoice-7`` is fresh although tenant A applied its own."""
    boxes = _inboxes(tenants, prefix, clock)
    inbox = boxes[None]  # one inbox; the connection chooses the tenant
    a, b = tenants.names
    applied: dict[str, list[bool]] = {a: [], b: []}
    for _ in range(2):
        for tenant in (a, b):
            for command_id in ("invoice-7", "invoice-8"):
                with tenants.conn_of(tenants.engine, tenant) as conn:
                    applied[tenant].append(_deliver(inbox, conn, command_id, {"n": 1}))
    assert applied == {a: [True, True, False, False], b: [True, True, False, False]}
    for tenant in (a, b):
        found = boxes[tenant].lookup("billing", "invoice-7")
        assert found is not None
        assert found.result == {"tenant": tenant}
    assert inbox.lookup("billing", "invoice-7") is None  # nothing in the default schema


def test_g13_mismatch_is_quarantined_in_the_tenant_schema(
    tenants: Tenants, prefix: str, clock: FakeClock
) -> None:
    """A changed payload in tenant B is refused and recorded in B's quarantine only."""
    boxes = _inboxes(tenants, prefix, clock)
    a, b = tenants.names
    for tenant in (a, b):
        with tenants.conn_of(tenants.engine, tenant) as conn:
            assert _deliver(boxes[None], conn, "invoice-7", {"n": 1})
    with (
        tenants.conn_of(tenants.engine, b) as conn,
        pytest.raises(PayloadMismatchError),
    ):
        _deliver(boxes[None], conn, "invoice-7", {"n": 2})
    assert [r.command_id for r in boxes[b].quarantined()] == ["invoice-7"]
    assert boxes[a].quarantined() == []
    assert boxes[None].quarantined() == []


def test_g13_purge_and_watermarks_stay_in_their_tenant(
    tenants: Tenants, prefix: str, clock: FakeClock
) -> None:
    """Purge deletes only its tenant's expired evidence; watermarks are per tenant."""
    boxes = _inboxes(tenants, prefix, clock)
    a, b = tenants.names
    for tenant in (a, b):
        with tenants.conn_of(tenants.engine, tenant) as conn:
            _deliver(boxes[None], conn, "invoice-7", {"n": 1})
    clock.advance(RETENTION + dt.timedelta(days=1))
    report = boxes[a].purge()
    assert report.acquired
    assert report.deleted == 1
    assert boxes[a].lookup("billing", "invoice-7") is None
    assert boxes[b].lookup("billing", "invoice-7") is not None
    assert boxes[b].purge().deleted == 1  # its own lock: not excluded by tenant A's
    for tenant, expected in ((a, [True, False]), (b, [True, False])):
        with tenants.conn_of(tenants.engine, tenant) as conn, conn.begin():
            moved = [
                boxes[None].advance_watermark(conn, consumer="billing", key="cust-1", position=5)
                for _ in range(2)
            ]
        assert moved == expected


def test_g13_outbox_and_ledger_in_a_tenant_schema(tenants: Tenants, prefix: str) -> None:
    """Outbox add and dispatch, and the effect ledger, work in each tenant's schema."""
    a, b = tenants.names
    outboxes = {t: Outbox(tenants.engine_of(t), table_prefix=prefix) for t in (None, a, b)}
    for box in outboxes.values():
        box.create_schema()
    for tenant in (a, b):
        with tenants.conn_of(tenants.engine, tenant) as conn, conn.begin():
            assert outboxes[None].add(conn, command_id="cmd-1", destination="q", payload={})
            assert not outboxes[None].add(conn, command_id="cmd-1", destination="q", payload={})
    sent: list[str] = []
    with Dispatcher(outboxes[a], lambda m: sent.append(m.command_id)) as dispatcher:
        assert dispatcher.run_once() == 1
    assert sent == ["cmd-1"]
    assert outboxes[a].status().backlog == 0
    assert outboxes[b].status().backlog == 1
    assert outboxes[None].get("cmd-1") is None

    ledgers = {t: EffectLedger(tenants.engine_of(t), table_prefix=prefix) for t in (a, b)}
    for tenant, ledger in ledgers.items():
        ledger.create_schema()
        gateway = SandboxGateway(tenants.engine, table_prefix=f"{prefix}gw{tenant[-2:]}_")
        gateway.create_schema()
        ledger.execute("pay-1", gateway, {"amount": 1})
        ledger.execute("pay-1", gateway, {"amount": 1})  # the stored receipt, no call
        assert gateway.requests() == 1
    for ledger in ledgers.values():
        record = ledger.get("pay-1")
        assert record is not None
        assert record.state is EffectState.CONFIRMED


def test_g13_async_guard_in_tenant_schemas(pg_url: str, prefix: str, clock: FakeClock) -> None:
    """guard_async on asyncpg: same IDs fresh in each tenant, a mismatch
    quarantined in the caller's tenant schema."""
    tenants_gen = _pg(pg_url)
    tenants = next(tenants_gen)
    try:
        boxes = _inboxes(tenants, prefix, clock)
        a, b = tenants.names
        aurl = pg_url.replace("postgresql+psycopg://", "postgresql+asyncpg://")
        fresh = asyncio.run(_async_deliveries(boxes[None], aurl, (a, b)))
        assert fresh == [True, True, False, False, "mismatch"]
        assert [r.command_id for r in boxes[b].quarantined()] == ["invoice-7"]
        assert boxes[a].quarantined() == []
        assert boxes[None].lookup("billing", "invoice-7") is None
    finally:
        next(tenants_gen, None)


async def _async_deliveries(inbox: Inbox, aurl: str, names: tuple[str, str]) -> list[object]:
    engine = create_async_engine(aurl)
    seen: list[object] = []
    try:
        for tenant, payload in ((names[0], 1), (names[1], 1), (names[0], 1), (names[1], 1)):
            seen.append(await _async_deliver(inbox, engine, tenant, payload))
        try:
            await _async_deliver(inbox, engine, names[1], 2)
        except PayloadMismatchError:
            seen.append("mismatch")
    finally:
        await engine.dispose()
    return seen


async def _async_deliver(inbox: Inbox, engine: AsyncEngine, tenant: str, n: int) -> bool:
    async with engine.connect() as conn:
        conn = await conn.execution_options(schema_translate_map={None: tenant})  # noqa: PLW2901
        async with (
            conn.begin(),
            inbox.guard_async(
                conn, consumer="billing", command_id="invoice-7", payload={"n": n}
            ) as entry,
        ):
            return not entry.duplicate
