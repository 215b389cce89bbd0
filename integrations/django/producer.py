"""Publish payments to the reference Django project's worker.

``python -m integrations.django.producer 100`` sends 100 payments, each twice.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


def publish(app: Any, items: Iterable[tuple[str, str, int]], *, copies: int = 1) -> int:
    """Send each ``(payment_id, account, amount)`` ``copies`` times; the count sent."""
    from integrations.django.tasks import TASK_NAME

    sent = 0
    with app.producer_or_acquire() as producer:
        for payment_id, account, amount in items:
            for _ in range(copies):
                app.send_task(TASK_NAME, args=[payment_id, account, amount], producer=producer)
                sent += 1
    return sent


def main() -> None:
    from integrations.django.tasks import app

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    sent = publish(app, ((f"pay-{n}", "acct-1", n) for n in range(count)), copies=2)
    print(f"sent {sent} messages for {count} payments")


if __name__ == "__main__":
    main()
