"""Send ``ship`` commands: ``python -m integrations.dramatiq.producer --count 100 --copies 2``.

Each copy is a separate ``send``, so it gets its own message ID: only the
business command ID (``order_id``) says that the copies are one command.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from dramatiq import Broker, Message

from integrations.dramatiq.brokers import make_broker
from integrations.dramatiq.settings import Settings

ACTOR = "ship"
#: The ``async def`` twin of ``ship`` (same table, its own consumer name).
ASYNC_ACTOR = "ship_async"


def ship_message(
    queue: str, order_id: str, sku: str = "sku-1", qty: int = 1, *, actor: str = ACTOR
) -> Message:  # type: ignore[type-arg]
    """A message for the ``ship`` (or ``ship_async``) actor, built without
    importing the worker."""
    return Message(
        queue_name=queue,
        actor_name=actor,
        args=(),
        kwargs={"order_id": order_id, "sku": sku, "qty": qty},
        options={},
    )


def send_commands(broker: Broker, queue: str, order_ids: Iterable[str], *, copies: int = 1) -> int:
    """Send every order ``copies`` times, copies interleaved; return messages sent."""
    ids = list(order_ids)
    sent = 0
    for _ in range(copies):
        for order_id in ids:
            broker.enqueue(ship_message(queue, order_id, qty=len(order_id)))
            sent += 1
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--copies", type=int, default=2)
    args = parser.parse_args()
    settings = Settings.from_env()
    broker = make_broker(settings.broker_url)
    sent = send_commands(
        broker, settings.queue, (f"order-{i}" for i in range(args.count)), copies=args.copies
    )
    broker.close()
    print(f"sent {sent} messages for {args.count} orders to {settings.queue!r}")


if __name__ == "__main__":
    main()
