"""Publish payment commands with aio-pika.

Usage: ``python -m integrations.asyncio.producer COUNT [COPIES]``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
from collections.abc import Iterable
from typing import Any

import aio_pika

from integrations.payments import Config


async def publish(config: Config, bodies: Iterable[dict[str, Any]], **properties: Any) -> int:
    """Publish each JSON body to the queue (declared durable); return how many were sent."""
    sent = 0
    connection = await aio_pika.connect(config.broker_url)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(config.queue, durable=True)
        for body in bodies:
            message = aio_pika.Message(
                json.dumps(body).encode(),
                content_type="application/json",
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                timestamp=dt.datetime.now(dt.UTC),
                **properties,
            )
            await channel.default_exchange.publish(message, routing_key=config.queue)
            sent += 1
    return sent


def main(argv: list[str]) -> None:
    count = int(argv[0]) if argv else 10
    copies = int(argv[1]) if len(argv) > 1 else 1
    bodies = [{"command_id": f"pay-{i}", "amount": i} for i in range(count) for _ in range(copies)]
    print(asyncio.run(publish(Config(), bodies)), "published")


if __name__ == "__main__":
    main(sys.argv[1:])
