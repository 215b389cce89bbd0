"""The kombu worker: applies each payment command once, whatever the broker redelivers."""

from __future__ import annotations

import logging
import time
from typing import Any

from kombu import Connection, Consumer, Queue
from kombu.message import Message
from kombu.mixins import ConsumerProducerMixin
from sqlalchemy import create_engine, insert
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.kombu import guarded
from integrations.payments import Config, hang, make_inbox, payments_table

logger = logging.getLogger("integrations.kombu")


class Worker(ConsumerProducerMixin):
    """Consumes ``config.queue``; republishes retry copies on its producer connection."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.connection = Connection(
            config.broker_url, transport_options=config.transport_options()
        )
        engine = create_engine(config.db_url)
        self.inbox = make_inbox(engine, config)
        self.payments = payments_table(config.prefix)
        self.callback = guarded(
            self.apply_payment,
            self.inbox,
            session_factory=sessionmaker(engine),
            command_id="command_id",
            consumer="payments",
            max_attempts=config.max_attempts,
            retry_delay=config.retry_delay,
            producer=lambda: self.producer,
            queue=config.queue,  # retries go back to this queue alone
            guarantee=inboxguard.Guarantee(
                no_external_effect=True, terminal_states=("paid (one payment row)", "quarantined")
            ),
        )

    def get_consumers(self, consumer_cls: type[Consumer], channel: Any) -> list[Consumer]:
        queue = Queue(self.config.queue, durable=True)
        return [
            consumer_cls(
                queues=[queue],
                callbacks=[self.on_delivery],
                # An undecodable body is quarantined, not acked by ConsumerMixin.
                on_decode_error=self.callback.on_decode_error,
                accept=["json"],
                prefetch_count=10,
            )
        ]

    def on_delivery(self, body: Any, message: Message) -> None:
        # The guarded callback refuses a body without a usable ID; these test
        # hooks must not fail on one first.
        cid = body.get("command_id") if isinstance(body, dict) else None
        if cid is not None and cid == self.config.hang_before_ack:
            message.ack = lambda *_, **__: hang(cid)  # type: ignore[method-assign]
        if self.config.delivery_log:
            with open(self.config.delivery_log, "a") as log:
                log.write(f"{cid}\n")
        self.callback(body, message)
        if self.config.delivery_log:
            with open(self.config.delivery_log, "a") as log:
                log.write(f"+{cid}\n")

    def apply_payment(self, body: dict[str, Any], message: Message) -> dict[str, Any]:
        session = inboxguard.current_session()
        session.execute(
            insert(self.payments).values(command_id=body["command_id"], amount=body["amount"])
        )
        if self.config.handler_delay:
            time.sleep(self.config.handler_delay.total_seconds())
        if body["command_id"] == self.config.hang_in_body:
            hang(body["command_id"])
        return {"applied": body["amount"]}

    def on_consume_ready(
        self, connection: Any, channel: Any, consumers: Any, **kwargs: Any
    ) -> None:
        print("ready", flush=True)


def build() -> Worker:
    """The worker of the environment's settings, not yet consuming:
    ``inboxguard guarantees --app 'integrations.kombu.worker:build()'``."""
    return Worker(Config())


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    Worker(Config()).run()


if __name__ == "__main__":
    main()
