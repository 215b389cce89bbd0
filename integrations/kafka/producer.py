"""Produce payment commands: ``python -m integrations.kafka.producer COUNT [COPIES]``.

Each command is a JSON value ``{"command_id", "amount"}`` produced COPIES times
(a producer retrying after a lost acknowledgement), keyed by its command ID
so that its copies share a partition, with ``acks="all"``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaProducer

from integrations.kafka.topics import bootstrap, declare
from integrations.payments import Config


async def publish(
    config: Config, bodies: Iterable[Any], headers: dict[str, str] | None = None
) -> int:
    """Produce each body to the payments topic, in order; return how many."""
    await declare(config)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap(config), acks="all")
    await producer.start()
    count = 0
    try:
        for body in bodies:
            key = str(body.get("command_id", "")) if isinstance(body, dict) else ""
            await producer.send_and_wait(
                config.queue,
                json.dumps(body).encode(),
                key=key.encode() or None,
                headers=[(k, v.encode()) for k, v in (headers or {}).items()],
            )
            count += 1
    finally:
        await producer.stop()
    return count


def main(argv: list[str]) -> None:
    count = int(argv[0]) if argv else 10
    copies = int(argv[1]) if len(argv) > 1 else 1
    bodies = [{"command_id": f"pay-{i}", "amount": i} for i in range(count) for _ in range(copies)]
    print(asyncio.run(publish(Config(), bodies)), "published")


if __name__ == "__main__":
    main(sys.argv[1:])
