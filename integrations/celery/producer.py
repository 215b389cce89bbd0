"""Publish transfer commands, each possibly several times with new task ids.

    python -m integrations.celery.producer --count 100 --copies 2

(settings come from the same environment variables as the worker).
"""

from __future__ import annotations

import argparse
import random
import uuid
from collections.abc import Iterable, Sequence

from celery import Celery

import inboxguard.adapters.celery  # noqa: F401  (stamps x-inbox-sent-at on publish)
from integrations.celery.business import ACCOUNTS
from integrations.celery.settings import (
    PLAIN_TASK_NAME,
    TASK_NAME,
    Settings,
    create_app,
    declare_dead_letter,
)

Command = tuple[str, str, int]


def commands(count: int, *, prefix: str = "tr", seed: int = 7) -> list[Command]:
    rng = random.Random(seed)
    return [(f"{prefix}-{n}", rng.choice(ACCOUNTS), rng.randint(1, 100)) for n in range(count)]


def with_copies(items: Sequence[Command], copies: int, *, seed: int = 11) -> list[Command]:
    """Every command ``copies`` times, shuffled, as a producer retry storm would send them."""
    out = [c for c in items for _ in range(copies)]
    random.Random(seed).shuffle(out)
    return out


def publish(
    app: Celery,
    settings: Settings,
    items: Iterable[Command],
    *,
    plain: bool = False,
    task: str | None = None,
) -> int:
    """Send each command as its own task (a new task id each time); return how many.

    The guarded task, the plain one with ``plain``, or the task named ``task``.
    """
    name = task or (PLAIN_TASK_NAME if plain else TASK_NAME)
    sent = 0
    with app.producer_or_acquire() as producer:
        for transfer_id, account, amount in items:
            app.send_task(
                name,
                args=(transfer_id, account, amount),
                task_id=str(uuid.uuid4()),
                queue=settings.queue,
                producer=producer,
            )
            sent += 1
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--plain", action="store_true", help="the unguarded baseline task")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    app = create_app(settings, include_tasks=False)
    declare_dead_letter(app, settings)
    sent = publish(app, settings, with_copies(commands(args.count), args.copies), plain=args.plain)
    print(f"published {sent} messages for {args.count} commands to {settings.queue}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
