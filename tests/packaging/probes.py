"""What each documented extra must be able to do on its own.

Each probe is a script run by the interpreter of a fresh virtualenv that has
only ``inboxguard[<extras>]`` installed. It reads the service URLs from the
environment, talks to the real service the extra is for, and prints ``ok``.
"""

from __future__ import annotations

POSTGRESQL = """
import datetime as dt, os
from sqlalchemy import create_engine, text
import inboxguard
engine = create_engine(os.environ["PG_URL"] + "/postgres")
with engine.connect() as conn:
    assert conn.execute(text("SELECT 1")).scalar() == 1
inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
"""

MYSQL = """
import datetime as dt, os
from sqlalchemy import create_engine, text
import inboxguard
engine = create_engine(os.environ["MYSQL_URL"] + "/")
with engine.connect() as conn:
    assert conn.execute(text("SELECT 1")).scalar() == 1
inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
"""

CELERY_AMQP = """
import os
from celery import Celery
import inboxguard.adapters.celery
app = Celery("probe", broker=os.environ["AMQP_URL"])
with app.connection() as conn:
    conn.ensure_connection(max_retries=1)
"""

CELERY_REDIS = """
import os
from celery import Celery
import inboxguard.adapters.celery
app = Celery("probe", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
with app.connection() as conn:
    conn.ensure_connection(max_retries=1)
    conn.default_channel.client.ping()
"""

DRAMATIQ = """
import os
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker
import inboxguard.adapters.dramatiq
RedisBroker(url=os.environ["REDIS_URL"]).client.ping()
# pika reads the vhost from the path: "/" must be spelled %2F
broker = RabbitmqBroker(url=os.environ["AMQP_URL"].rstrip("/") + "/%2F")
assert broker.connection.is_open
broker.close()
"""

KOMBU_AMQP = """
import os
import kombu
import inboxguard.adapters.kombu
with kombu.Connection(os.environ["AMQP_URL"]) as conn:
    conn.ensure_connection(max_retries=1)
"""

KOMBU_REDIS = """
import os
import kombu
import inboxguard.adapters.kombu
with kombu.Connection(os.environ["REDIS_URL"]) as conn:
    conn.ensure_connection(max_retries=1)
    conn.default_channel.client.ping()
"""

ASYNCIO = """
import asyncio, datetime as dt, os
import aio_pika
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine
import inboxguard
import inboxguard.adapters.aio_pika

async def main():
    connection = await aio_pika.connect(os.environ["AMQP_URL"])
    await connection.close()
    engine = create_async_engine("sqlite+aiosqlite:///probe.db")
    inbox = inboxguard.Inbox(create_engine("sqlite:///probe.db"), retention=dt.timedelta(days=1))
    async with engine.begin() as conn:
        await conn.run_sync(inbox.tables.metadata.create_all)
    for _ in range(2):
        async with engine.begin() as conn:
            async with inbox.guard_async(
                conn, consumer="probe", command_id="c-1", payload={"n": 1}
            ) as entry:
                seen.append(entry.duplicate)
    assert seen == [False, True], seen
    await engine.dispose()

seen = []
asyncio.run(main())
"""

ORCH8 = """
import asyncio, datetime as dt
from orch8 import Orch8Client
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
import inboxguard
from inboxguard.adapters.orch8 import InboxWorker, guarded
from inboxguard.testing.orch8 import StandInEngine

async def handler(task):
    return {"done": task.params["n"]}

async def main():
    inbox = inboxguard.Inbox(create_engine("sqlite:///probe.db"), retention=dt.timedelta(days=1))
    inbox.create_schema()
    engine = create_async_engine("sqlite+aiosqlite:///probe.db")
    task = guarded(handler, inbox, consumer="probe", session_factory=async_sessionmaker(engine),
                   retry_window=dt.timedelta(hours=1), reaper_window=dt.timedelta(minutes=1))
    with StandInEngine() as standin:
        standin.add_task("h", instance_id="i", params={"n": 1})
        async with Orch8Client(standin.url) as client:
            worker = InboxWorker(client, "w", {"h": task}, poll_interval=0.02)
            running = asyncio.create_task(worker.start())
            async with asyncio.timeout(60):
                while standin.step_state("i") != "completed":
                    await asyncio.sleep(0.02)
            await worker.stop()
            running.cancel()
        assert standin.tasks("i")[0]["output"] == {"done": 1}
    await engine.dispose()

asyncio.run(main())
"""

FASTSTREAM = """
import asyncio, datetime as dt, os
from faststream.nats import NatsBroker
from faststream.rabbit import RabbitBroker
from faststream.redis import RedisBroker
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware

async def main():
    for broker in (
        RabbitBroker(os.environ["AMQP_URL"]),
        RedisBroker(os.environ["REDIS_URL"]),
        NatsBroker(os.environ.get("NATS_URL", "nats://127.0.0.1:4222")),
    ):
        async with broker:
            assert await broker.ping(5), broker
    inbox = inboxguard.Inbox(create_engine("sqlite:///probe.db"), retention=dt.timedelta(days=1))
    inbox.create_schema()
    engine = create_async_engine("sqlite+aiosqlite:///probe.db")
    InboxMiddleware(
        inbox, consumer="probe", command_id="id", async_session_factory=async_sessionmaker(engine)
    )
    await engine.dispose()

asyncio.run(main())
# The extra brings the `faststream run` command (FastStream's cli extra).
import subprocess, sys
subprocess.run(
    [sys.executable, "-m", "faststream", "run", "--help"], check=True, capture_output=True
)
"""

KAFKA = """
import asyncio, datetime as dt
from aiokafka import AIOKafkaConsumer
from faststream.kafka import KafkaBroker
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware
from inboxguard.adapters.kafka import GuardedConsumer
from inboxguard.adapters.kafka.transport import KafkaTransport

async def main():
    inbox = inboxguard.Inbox(create_engine("sqlite:///probe.db"), retention=dt.timedelta(days=1))
    inbox.create_schema()
    engine = create_async_engine("sqlite+aiosqlite:///probe.db")
    sessions = async_sessionmaker(engine)
    consumer = AIOKafkaConsumer(group_id="g", enable_auto_commit=False)
    GuardedConsumer(consumer, inbox, name="probe", topics=["t"], session_factory=sessions)
    await consumer.stop()
    guard = InboxMiddleware(
        inbox, consumer="probe", command_id="id", async_session_factory=sessions
    )
    KafkaBroker("127.0.0.1:9092", middlewares=[guard])
    KafkaTransport("127.0.0.1:9092").close()
    await engine.dispose()

asyncio.run(main())
"""

MIGRATIONS = """
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect
from inboxguard.migrations import VERSION_LOCATION
command.init(Config("alembic.ini"), "env")
cfg = Config()
cfg.set_main_option("script_location", "env")
cfg.set_main_option("sqlalchemy.url", "sqlite:///probe-migrations.db")
cfg.set_main_option("path_separator", "os")
cfg.set_main_option("version_locations", VERSION_LOCATION)
command.upgrade(cfg, "inboxguard@head")
tables = inspect(create_engine("sqlite:///probe-migrations.db")).get_table_names()
assert "inboxguard_inbox" in tables, tables
"""

DJANGO = """
import datetime as dt, django
from django.conf import settings
settings.configure(USE_TZ=True, INSTALLED_APPS=["inboxguard.django"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "probe-django.db",
                           "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL"}}},
    INBOXGUARD={"RETENTION": dt.timedelta(days=1)})
django.setup()
from django.core.management import call_command
from django.db import transaction
from inboxguard.django import inbox
call_command("migrate", verbosity=0)
with transaction.atomic(), inbox.guard(consumer="c", command_id="1", payload={}) as entry:
    assert not entry.duplicate
assert inbox.lookup("c", "1") is not None
"""

#: Extra set -> (probes it must pass, services they need).
EXTRA_SETS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "postgresql": ((POSTGRESQL,), ("postgresql",)),
    "mysql": ((MYSQL,), ("mysql",)),
    "celery": ((CELERY_AMQP,), ("rabbitmq",)),
    "celery,redis": ((CELERY_REDIS,), ("redis",)),
    "dramatiq": ((DRAMATIQ,), ("redis", "rabbitmq")),
    "kombu": ((KOMBU_AMQP,), ("rabbitmq",)),
    "kombu,redis": ((KOMBU_REDIS,), ("redis",)),
    "asyncio": ((ASYNCIO,), ("rabbitmq",)),
    "migrations": ((MIGRATIONS,), ()),
    "faststream": ((FASTSTREAM,), ("rabbitmq", "redis", "nats")),
    "orch8": ((ORCH8,), ()),
    "kafka": ((KAFKA,), ()),
    "all": (
        (
            POSTGRESQL,
            MYSQL,
            CELERY_AMQP,
            CELERY_REDIS,
            DRAMATIQ,
            KOMBU_AMQP,
            KOMBU_REDIS,
            ASYNCIO,
            MIGRATIONS,
            DJANGO,
            FASTSTREAM,
            ORCH8,
            KAFKA,
        ),
        ("postgresql", "mysql", "redis", "rabbitmq", "nats"),
    ),
}
