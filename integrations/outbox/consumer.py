"""A kombu consumer that ships each order once, whatever the broker redelivers.

The inbox claim and the shipment row commit in one transaction; the message
is acknowledged only after that commit.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from kombu import Connection, Queue
from kombu.mixins import ConsumerMixin
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard.outbox import HEADER_COMMAND_ID, HEADER_SENT_AT
from integrations.outbox.config import Settings, inbox, tables

CONSUMER = "shop.shipping"


class Shipper(ConsumerMixin):  # type: ignore[misc]
    def __init__(self, settings: Settings) -> None:
        self.connection = Connection(settings.broker_url)
        self.queue = Queue(settings.queue, durable=True)
        self.engine = create_engine(settings.database_url)
        self.inbox = inbox(self.engine, settings.prefix)
        _, _, self.shipments = tables(settings.prefix)
        self.pid = os.getpid()

    def get_consumers(self, consumer_cls: Any, channel: Any) -> list[Any]:
        return [
            consumer_cls(
                queues=[self.queue], callbacks=[self.on_message], accept=["json"], prefetch_count=50
            )
        ]

    def on_message(self, body: Any, message: Any) -> None:
        headers = message.headers or {}
        command_id = headers.get(HEADER_COMMAND_ID) or message.properties.get("message_id")
        sent_at = headers.get(HEADER_SENT_AT)
        try:
            with (
                Session(self.engine) as session,
                session.begin(),
                self.inbox.guard(
                    session,
                    consumer=CONSUMER,
                    command_id=command_id,
                    payload=body,
                    sent_at=dt.datetime.fromisoformat(sent_at) if sent_at else None,
                ) as entry,
            ):
                if not entry.duplicate:
                    session.execute(
                        self.shipments.insert().values(order_id=body["order_id"], pid=self.pid)
                    )
                    entry.result = {"shipped": body["order_id"]}
        except inboxguard.CommandRejectedError:
            message.reject(requeue=False)  # quarantined: the record of truth
            return
        except Exception as exc:
            if inboxguard.is_retryable(exc):
                message.requeue()
                return
            raise
        message.ack()


def main() -> None:
    settings = Settings.from_env()
    print("ready", flush=True)
    Shipper(settings).run()


if __name__ == "__main__":
    main()
