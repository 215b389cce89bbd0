"""The kombu settlement table: each consumer setting that decides when a
guarded delivery is acked, copied back or dropped, and the values the
callback accepts.

The retry route is read when the callback is declared (``guarded(queue=)``)
and the delivery path follows it (``inboxguard.adapters._route``); a setting
the callback can see only on the message (``no_ack``) is judged there.
Rendered into docs/adapters/kombu.md.
"""

from __future__ import annotations

from typing import Any

from kombu.message import Message

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable, equals

__all__ = ["KOMBU_SETTLEMENT", "acked_on_delivery", "check_delivery", "route_of"]

KOMBU_SETTLEMENT = SettlementTable(
    "kombu",
    (
        Setting(
            "retry route",
            "guarded(queue=)",
            (
                Choice(
                    "queue given",
                    "accepts",
                    "a copy goes to the default exchange under the queue's name: back to"
                    " that queue alone, whatever exchange the delivery came through",
                    equals("queue given"),
                ),
                Choice(
                    "no queue",
                    "adjusts",
                    "a delivery that came through the default exchange is copied under its"
                    " routing key (the queue's name); any other is handed back to the broker"
                    " (requeued), never copied to its exchange, where other queues may be"
                    " bound",
                    equals("no queue"),
                ),
            ),
        ),
        Setting(
            "no_ack",
            "Consumer",
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


def acked_on_delivery(message: Message) -> bool:
    """Whether ``message`` came to a consumer with ``no_ack=True`` (kombu's own
    test in ``Message.ack``: the channel's ``no_ack_consumers``)."""
    channel: Any = message.channel
    tags = getattr(channel, "no_ack_consumers", None)
    tag = (message.delivery_info or {}).get("consumer_tag")
    return tags is not None and tag is not None and tag in tags


def route_of(queue: str | None) -> str:
    """The row of the retry route ``queue`` (the consumed queue's name) makes."""
    return "queue given" if queue is not None else "no queue"


def check_delivery(message: Message, where: str) -> None:
    """Refuse a delivery whose consumer settings the table does not know to be safe.

    Raises:
        ConfigurationError: naming the setting and its safe values.
    """
    KOMBU_SETTLEMENT.check({"no_ack": acked_on_delivery(message)}, where)
