"""Publish payment commands: ``python -m integrations.kombu.producer COUNT [COPIES]``.

Each command is a JSON body ``{"command_id", "amount"}`` published COPIES times
(the duplicate publishing a real producer does after a lost confirm).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any

from kombu import Connection, Producer, Queue

from integrations.payments import Config


def publish(config: Config, bodies: Iterable[dict[str, Any]], **properties: Any) -> int:
    """Publish each body to the queue (declared durable); return how many were sent."""
    sent = 0
    with Connection(config.broker_url, transport_options=config.transport_options()) as conn:
        producer = Producer(conn)
        queue = Queue(config.queue, durable=True)
        for body in bodies:
            producer.publish(
                body,
                routing_key=config.queue,
                serializer="json",
                declare=[queue],
                timestamp=int(time.time()),
                **properties,
            )
            sent += 1
    return sent


def main(argv: list[str]) -> None:
    count = int(argv[0]) if argv else 10
    copies = int(argv[1]) if len(argv) > 1 else 1
    bodies = [{"command_id": f"pay-{i}", "amount": i} for i in range(count) for _ in range(copies)]
    print(publish(Config(), bodies), "published")


if __name__ == "__main__":
    main(sys.argv[1:])
