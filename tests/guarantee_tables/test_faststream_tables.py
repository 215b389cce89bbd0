"""F18-F19: ``inboxguard guarantees`` lists every guarded FastStream
subscriber, one per broker (RabbitMQ, Redis Streams, NATS JetStream, Kafka),
with the settlement rows the FastStream table reads, and shows a setting the
table refuses as a contradiction. No broker is contacted: the tables are
read from the subscribers' declarations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import inboxguard
from inboxguard.cli import main
from tests.conftest import unique

APP = """
import datetime as dt
import os
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.nats import ConsumerConfig, JStream, NatsBroker
from faststream.rabbit import RabbitBroker, RabbitQueue
from faststream.redis import RedisBroker, StreamSub
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker
import inboxguard
from inboxguard.adapters.faststream import InboxMiddleware, inbox_consumer

engine = create_engine("sqlite:///" + os.path.join(os.path.dirname(__file__), "app.db"))
inbox = inboxguard.Inbox(engine, retention=dt.timedelta(days=7))
guard = InboxMiddleware(
    inbox,
    consumer="billing.charge",
    command_id="payment_id",
    session_factory=sessionmaker(engine),
    max_attempts=4,
)
rabbit = RabbitBroker(middlewares=[guard])
redis = RedisBroker(middlewares=[guard])
nats = NatsBroker(middlewares=[guard])
kafka = KafkaBroker(middlewares=[guard])


@rabbit.subscriber(RabbitQueue("charges"), ack_policy=AckPolicy.{RABBIT_POLICY})
async def charge(body): ...


@redis.subscriber(stream=StreamSub("refunds", group="g", consumer="c1", min_idle_time=30_000))
@inbox_consumer("billing.refund")
async def refund(body): ...


@nats.subscriber("payouts", stream=JStream("money"), config=ConsumerConfig(max_deliver={CAP}))
@inbox_consumer("billing.payout")
async def payout(body): ...


@kafka.subscriber("ledger", group_id="g", ack_policy=AckPolicy.MANUAL)
@inbox_consumer("billing.ledger")
async def ledger(body): ...
"""


def _app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **values: str) -> str:
    name = unique("fs_tables_")
    text = APP.replace("{RABBIT_POLICY}", values.get("policy", "REJECT_ON_ERROR"))
    (tmp_path / f"{name}.py").write_text(text.replace("{CAP}", values.get("cap", "10")))
    monkeypatch.chdir(tmp_path)  # resolved from the current directory
    return name


def test_f18_every_guarded_subscriber_is_listed_with_its_settlement_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One handler per broker, each under its consumer name, its delivery
    mode naming its broker and every settlement row of its broker as the
    table reads it; ``--check`` passes (every value is one the table accepts)."""
    app = _app(tmp_path, monkeypatch)
    assert main(["guarantees", "--app", app, "--json"]) == 0
    tables = {t["consumer"]: t for t in json.loads(capsys.readouterr().out)}
    rows = {consumer: t["delivery_mode"]["settings"] for consumer, t in tables.items()}
    assert sorted(rows) == ["billing.charge", "billing.ledger", "billing.payout", "billing.refund"]
    assert rows["billing.charge"] == {
        "ack_policy": "reject_on_error",
        "broker": "RabbitMQ",
        "max_attempts": 4,
        "reads": "queue charges",
        "retry_delay": "1s",
    }
    assert rows["billing.refund"]["broker"] == "Redis Streams"
    assert rows["billing.refund"]["StreamSub.group"] == "g"
    assert rows["billing.refund"]["StreamSub.no_ack"] is False
    assert rows["billing.refund"]["claiming subscriber"] is True
    assert rows["billing.payout"]["broker"] == "NATS JetStream"
    assert rows["billing.payout"]["ConsumerConfig.ack_policy"] == "explicit"
    assert rows["billing.payout"]["ConsumerConfig.max_deliver"] == 10
    assert rows["billing.ledger"]["broker"] == "Kafka"
    assert rows["billing.ledger"]["ack_policy"] == "manual"
    assert tables["billing.refund"]["handler"] == f"{app}.refund"
    assert tables["billing.refund"]["dedup_window"]["settings"]["redis_claim_idle"] == "30s"
    assert main(["guarantees", "--app", app, "--check"]) == 0
    assert "ok: 4 handlers, no contradiction" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("values", "setting"),
    [
        ({"cap": "4"}, "ConsumerConfig.max_deliver=4"),
        ({"policy": "ACK_FIRST"}, "ack_policy='ack_first'"),
    ],
    ids=["max_deliver=max_attempts", "ack_first"],
)
def test_f19_a_refused_setting_is_a_contradiction_of_the_table(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    values: dict[str, str],
    setting: str,
) -> None:
    """A JetStream cap at ``max_attempts`` or an ``ACK_FIRST`` subscriber: the
    table still lists the subscriber, and ``--check`` names the refused
    value with the table's reason and safe values, and exits 1, as
    ``check_startup`` would refuse it."""
    app = _app(tmp_path, monkeypatch, **values)
    assert main(["guarantees", "--app", app, "--check"]) == 1
    out = capsys.readouterr().out
    [line] = [line for line in out.splitlines() if setting in line]
    assert ": delivery_mode: " in line
    assert "; use " in line


def test_f18_check_startup_lists_the_subscribers_on_the_inbox(
    table_inbox: inboxguard.Inbox,
) -> None:
    """After the app's start-up hook ran ``check_startup(broker)``, the inbox
    alone lists the broker's guarded subscribers (``--app module:inbox``)."""
    from faststream.rabbit import RabbitBroker, RabbitQueue
    from sqlalchemy.orm import sessionmaker

    from inboxguard.adapters.faststream import InboxMiddleware

    guard = InboxMiddleware(
        table_inbox,
        consumer="shipping.ship",
        command_id="order_id",
        session_factory=sessionmaker(table_inbox.engine),
    )
    broker = RabbitBroker(middlewares=[guard])

    @broker.subscriber(RabbitQueue(unique("ship")))
    async def ship(body: Any) -> None:
        return None

    guard.check_startup(broker)
    (table,) = inboxguard.guarantees_of(table_inbox)
    assert table.consumer == "shipping.ship"
    delivery = table.fact("delivery_mode")
    assert delivery is not None
    assert delivery.settings["broker"] == "RabbitMQ"
    assert delivery.settings["ack_policy"] == "reject_on_error"
