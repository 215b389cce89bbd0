"""A dispatcher process: delivers the outbox to the broker.

``OUTBOX_TRANSPORT`` picks the transport: ``kombu`` (default; the kombu
consumer of this app reads it) or ``dramatiq`` (messages for the Dramatiq
reference app's ``ship`` actor, on the queue ``OUTBOX_QUEUE``).
``OUTBOX_SEND_DELAY`` (seconds) slows each send, and ``OUTBOX_TRACE=1``
prints ``sent <command_id>`` after each confirmed publish, so a test can
kill the process in the middle of a batch. ``OUTBOX_HOLD_AFTER=N`` makes the
send after the N-th publish wait (up to two minutes, then fail as
undelivered): the process then holds a batch it has partly published and not
recorded for as long as a test needs, whatever the machine's load.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from typing import Any

from kombu import Connection, Queue
from sqlalchemy import create_engine

import inboxguard
from inboxguard.adapters.kombu.transport import KombuTransport
from integrations.outbox.config import Settings, outbox


def kombu_transport(settings: Settings) -> Any:
    conn = Connection(
        settings.broker_url, connect_timeout=1, transport_options={"confirm_publish": True}
    )
    # Declare the queue the rows go to: a dispatcher that starts before the
    # consumer still delivers (without it, RabbitMQ returns each message and
    # the rows back off until the consumer declares the queue).
    return KombuTransport(
        conn,
        declare=[Queue(settings.queue, durable=True)],
        retry_policy={"max_retries": 1, "interval_start": 0.1, "interval_step": 0.1},
    )


def dramatiq_transport(settings: Settings) -> Any:
    from inboxguard.adapters.dramatiq.transport import DramatiqTransport

    url = settings.broker_url
    if url.startswith("redis://"):
        from dramatiq.brokers.redis import RedisBroker

        broker: Any = RedisBroker(url=url, socket_connect_timeout=1)
    else:
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        # pika reads the vhost "/" only percent-encoded.
        pika_url = url.rstrip("/") + "/%2F" if url.endswith("//") else url
        broker = RabbitmqBroker(url=pika_url, confirm_delivery=True)
    broker.declare_queue(settings.queue)
    return DramatiqTransport(broker, queue_name=settings.queue)


def transport_for(settings: Settings) -> Any:
    if os.environ.get("OUTBOX_TRANSPORT", "kombu") == "dramatiq":
        inner = dramatiq_transport(settings)
    else:
        inner = kombu_transport(settings)
    delay = float(os.environ.get("OUTBOX_SEND_DELAY", "0"))
    trace = os.environ.get("OUTBOX_TRACE") == "1"
    hold_after = int(os.environ.get("OUTBOX_HOLD_AFTER", "0"))
    pid = os.getpid()
    published = 0

    def send(message: inboxguard.OutboxMessage) -> dict[str, Any]:
        nonlocal published
        if hold_after and published >= hold_after:
            time.sleep(120)
            raise ConnectionError("held for the test (OUTBOX_HOLD_AFTER)")
        if delay:
            time.sleep(delay)
        receipt = inner(message)
        published += 1
        if trace:
            print(f"sent {message.command_id}", flush=True)
        return {**receipt, "pid": pid}

    return send


def main() -> None:
    settings = Settings.from_env()
    engine = create_engine(settings.database_url)
    dispatcher = inboxguard.Dispatcher(
        outbox(engine, settings.prefix),
        transport_for(settings),
        batch_size=int(os.environ.get("OUTBOX_BATCH_SIZE", "50")),
        lease=dt.timedelta(seconds=float(os.environ.get("OUTBOX_LEASE", "10"))),
        poll_interval=dt.timedelta(seconds=float(os.environ.get("OUTBOX_POLL", "0.2"))),
        backoff=inboxguard.outbox.exponential_backoff(
            dt.timedelta(seconds=0.2), dt.timedelta(seconds=2)
        ),
        max_attempts=100,
        wakeup=os.environ.get("OUTBOX_WAKEUP") == "1",
    )
    print("ready", flush=True)
    stats = dispatcher.run_forever()
    print(f"stopped {stats}", flush=True)
    engine.dispose()
    sys.exit(0)


if __name__ == "__main__":
    main()
