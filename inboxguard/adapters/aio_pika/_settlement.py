"""The aio-pika settlement table: where a guarded callback's retry copy goes,
by the ``exchange`` and ``queue`` it was given, whether the queue is
consumed with acknowledgements, and what the callback does.

The route is read when the callback is declared (``guarded``) and the
delivery path follows the accepted row (``_route``); ``no_ack`` is set on
``queue.consume``, out of the callback's sight, and is judged on each
delivery. Rendered into docs/adapters/asyncio.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable, equals

__all__ = ["AIO_PIKA_SETTLEMENT", "acked_on_delivery", "check_delivery", "check_route", "route_of"]


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
        Setting(
            "no_ack",
            "queue.consume",
            (
                Choice(
                    "False",
                    "accepts",
                    "the callback acks after the commit, or copies the message back first",
                    equals(False),
                ),
                Choice(
                    "True",
                    "refuses",
                    "the broker dropped its copy on delivery: nothing can be retried or"
                    " rejected; each delivery is quarantined under configuration, never run",
                    equals(True),
                ),
            ),
        ),
    ),
)


def acked_on_delivery(message: Any) -> bool:
    """Whether ``message`` came to a consumer with ``no_ack=True``.

    aio-pika marks such a delivery (and one without a delivery tag, which
    nothing can settle either) ``processed`` as it builds the message, before
    any callback sees it; a message the broker still holds arrives unprocessed.
    """
    return bool(getattr(message, "processed", False))


def check_delivery(message: Any, where: str) -> None:
    """Refuse a delivery whose consumer settings the table does not know to be safe.

    Raises:
        ConfigurationError: naming the setting and its safe values.
    """
    AIO_PIKA_SETTLEMENT.check({"no_ack": acked_on_delivery(message)}, where)


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
