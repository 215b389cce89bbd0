"""D9 end to end: the reference app's ``async def`` actor (``ship_async``) in a
real ``dramatiq`` worker process, on Redis with PostgreSQL (asyncpg)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from integrations.dramatiq.model import applications, make_inbox
from integrations.dramatiq.producer import ASYNC_ACTOR, ship_message
from integrations.dramatiq.settings import Settings
from tests.adapters.dramatiq.test_e2e import results_of
from tests.conftest import DUPLICATED_COMMANDS

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]


@pytest.mark.parametrize("broker_name", ["redis"], indirect=True)
def test_d9_async_actor_applies_each_command_once(
    app_settings: Settings, producer: Any, start_worker: Any, engine: Engine
) -> None:
    """Commands (DUPLICATED_COMMANDS), each sent 2-3 times with new message IDs, to
    the guarded async actor on 4 worker threads: one row per command, every
    copy's result the first's."""
    count = DUPLICATED_COMMANDS
    worker = start_worker(threads=4)
    worker.wait_ready()
    orders = [f"order-{i}" for i in range(count)]

    def send(order_id: str) -> Any:
        message = ship_message(app_settings.queue, order_id, qty=5, actor=ASYNC_ACTOR)
        return producer.enqueue(message)

    messages = [send(o) for o in orders] + [send(o) for o in orders]
    messages += [send(o) for o in orders[::3]]
    assert len({m.message_id for m in messages}) == len(messages) == count * 2 + len(orders[::3])

    results = results_of(messages)

    assert applications(engine, app_settings.prefix) == dict.fromkeys(orders, 1)
    assert results == [{"order_id": m.kwargs["order_id"], "shipped": 5} for m in messages]
    inbox = make_inbox(engine, app_settings.prefix, app_settings.retention_days)
    with engine.connect() as conn:
        consumers = set(conn.execute(select(inbox.tables.inbox.c.consumer)).scalars())
    assert consumers == {"shipping.ship_async"}
