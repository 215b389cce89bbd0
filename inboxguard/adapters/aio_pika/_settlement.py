"""The aio-pika settlement table: where a guarded callback's retry copy goes,
by the ``exchange`` and ``queue`` it was given, and what the callback does.

Read when the callback is declared (``guarded``); the delivery path follows
the accepted row (``_route``). Rendered into docs/adapters/asyncio.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable

__all__ = ["AIO_PIKA_SETTLEMENT", "check_route", "route_of"]


def _is(name: str) -> Any:
    def match(value: Any, _: Mapping[str, Any]) -> bool:
        return bool(value == name)

    return match


AIO_PIKA_SETTLEMENT = SettlementTable(
    "aio-pika",
    (
        Setting(
            "retry route",
            "guarded(exchange=, queue=)",
            (
                Choice(
                    "default exchange + queue",
                    "accepts",
                    "a copy goes to the default exchange under the queue's name: back to"
                    " the queue, whatever exchange the delivery came through",
                    _is("default exchange + queue"),
                ),
                Choice(
                    "default exchange, no queue",
                    "adjusts",
                    "a delivery that came through the default exchange is copied under its"
                    " routing key (the queue's name); any other is handed back to the broker"
                    " (nack with requeue), never copied under a key that names no queue",
                    _is("default exchange, no queue"),
                ),
                Choice(
                    "named exchange",
                    "accepts",
                    "a copy goes to that exchange under the delivery's routing key; a copy"
                    " the broker returns unroutable hands the original back",
                    _is("named exchange"),
                ),
            ),
        ),
    ),
)


def route_of(exchange: object, queue: str | None) -> str:
    """The row of the retry route ``exchange`` and ``queue`` make."""
    if getattr(exchange, "name", None):
        return "named exchange"
    return "default exchange + queue" if queue is not None else "default exchange, no queue"


def check_route(exchange: object, queue: str | None, where: str) -> None:
    """Refuse a retry route the table does not know (an exchange with no name).

    Raises:
        ConfigurationError: naming the safe routes.
    """
    value = route_of(exchange, queue) if hasattr(exchange, "name") else repr(exchange)
    AIO_PIKA_SETTLEMENT.check({"retry route": value}, where)
