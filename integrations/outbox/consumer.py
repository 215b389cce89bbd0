"""A kombu consumer that ships each order once, whatever the broker redelivers.

The consumer side of the outbox: :func:`inboxguard.adapters.kombu.guarded`
takes the command ID from the ``x-inbox-command-id`` header the dispatcher
stamps and the sent time from ``x-inbox-sent-at``, so the handler only does
the business work. The inbox claim and the shipment row commit in one
transaction; the message is acknowledged only after that commit. A busy claim
or a transient database error is retried by a delayed copy (never a hot
requeue loop); a refused command is quarantined, then dead-lettered.
"""

from __future__ import annotations

import os
from typing import Any

from kombu import Connection, Queue
from kombu.message import Message
from kombu.mixins import ConsumerMixin
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import guarded
from integrations.outbox.config import Settings, inbox, tables

CONSUMER = "shop.shipping"


class Shipper(ConsumerMixin):  # type: ignore[misc]
    def __init__(self, settings: Settings) -> None:
        self.connection = Connection(settings.broker_url)
        self.queue = Queue(settings.queue, durable=True)
        self.engine = create_engine(settings.database_url)
        _, _, self.shipments = tables(settings.prefix)
        self.pid = os.getpid()
        self.inbox = inbox(self.engine, settings.prefix)
        self.on_message = guarded(
            self.ship,
            self.inbox,
            session_factory=sessionmaker(self.engine),
            consumer=CONSUMER,
            queue=self.queue,  # retries go back to this queue alone
            require_sent_at=True,  # the outbox stamps every message it relays
            guarantee=inboxguard.Guarantee(
                no_external_effect=True, terminal_states=("shipped (one row)", "quarantined")
            ),
        )

    def get_consumers(self, consumer_cls: Any, channel: Any) -> list[Any]:
        return [
            consumer_cls(
                queues=[self.queue],
                callbacks=[self.on_message],
                on_decode_error=self.on_message.on_decode_error,
                accept=["json"],
                prefetch_count=50,
            )
        ]

    def ship(self, body: dict[str, Any], message: Message) -> dict[str, Any]:
        """The business work, inside the guard's transaction."""
        inboxguard.current_session().execute(
            self.shipments.insert().values(order_id=body["order_id"], pid=self.pid)
        )
        return {"shipped": body["order_id"]}


def build() -> Shipper:
    """The consumer of the environment's settings, not yet consuming:
    ``inboxguard guarantees --app 'integrations.outbox.consumer:build()'``."""
    return Shipper(Settings.from_env())


def main() -> None:
    settings = Settings.from_env()
    print("ready", flush=True)
    Shipper(settings).run()


if __name__ == "__main__":
    main()
