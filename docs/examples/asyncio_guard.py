"""The asyncio guard: an AsyncSession on aiosqlite, the Inbox on a sync engine."""

import asyncio
import tempfile
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select

database = Path(tempfile.mkdtemp()) / "app.db"
charges = Table("charges", MetaData(), Column("id", String(40)), Column("cents", Integer))

# --8<-- [start:guard]
from datetime import timedelta

from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

import inboxguard

engine = create_async_engine(f"sqlite+aiosqlite:///{database}")  # postgresql+asyncpg://...
# the Inbox takes a sync Engine on the same database, with a sync driver
inbox = inboxguard.Inbox(create_engine(f"sqlite:///{database}"), retention=timedelta(days=7))
sessions = async_sessionmaker(engine)


async def setup() -> None:
    async with engine.begin() as conn:  # create_schema(), the asyncio way
        await conn.run_sync(inbox.tables.metadata.create_all)


async def on_command(cmd: dict) -> None:
    async with sessions() as session, session.begin():
        async with inbox.guard_async(
            session, consumer="billing.charge", command_id=cmd["command_id"], payload=cmd
        ) as entry:
            if entry.duplicate:
                return
            await session.execute(charges.insert().values(id=cmd["command_id"], cents=cmd["cents"]))
            entry.result = {"charged": True}


# --8<-- [end:guard]


async def main() -> None:
    await setup()
    async with engine.begin() as conn:
        await conn.run_sync(charges.metadata.create_all)
    command = {"command_id": "c-1", "cents": 700}
    await asyncio.gather(on_command(command), on_command(command))  # racing copies
    await on_command(command)
    async with engine.connect() as conn:
        assert await conn.scalar(select(func.count()).select_from(charges)) == 1
    await engine.dispose()


asyncio.run(main())
