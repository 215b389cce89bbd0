"""Publish payment commands: ``python -m integrations.faststream.producer COUNT [COPIES]``.

Each command is a JSON body ``{"command_id", "amount"}`` published COPIES times
(the duplicate publishing a real producer does after a lost confirm). The
``SentAtMiddleware`` stamps ``x-inbox-sent-at`` on each.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any

from inboxguard.adapters.faststream import SentAtMiddleware
from integrations.faststream.brokers import declare, make_broker, publish_options
from integrations.payments import Config

#: Publishes awaited together: each waits for its broker confirmation, so one
#: at a time spends most of its time waiting (the order within a chunk is free).
CHUNK = 100


async def publish(
    config: Config,
    bodies: Iterable[Any],
    headers: dict[str, Any] | None = None,
    *,
    in_order: bool = False,
) -> int:
    """Publish each body (declaring the destination first), confirmed by the
    broker; return how many. ``in_order=True`` publishes one at a time, so the
    queue holds the bodies in the order given."""
    await declare(config)
    broker = make_broker(config, middlewares=[SentAtMiddleware])
    where = publish_options(config)
    todo = list(bodies)
    chunk = 1 if in_order else CHUNK
    async with broker:
        for start in range(0, len(todo), chunk):
            await asyncio.gather(
                *(
                    broker.publish(body, headers=dict(headers or {}), **where)
                    for body in todo[start : start + chunk]
                )
            )
    return len(todo)


def main(argv: list[str]) -> None:
    count = int(argv[0]) if argv else 10
    copies = int(argv[1]) if len(argv) > 1 else 1
    bodies = [{"command_id": f"pay-{i}", "amount": i} for i in range(count) for _ in range(copies)]
    print(asyncio.run(publish(Config(), bodies, in_order=True)), "published")


if __name__ == "__main__":
    main(sys.argv[1:])
