"""The kombu settlement table: each consumer setting that decides when a
guarded delivery is acked, copied back or dropped, and the values the
callback accepts.

The callback reads it on the delivery path: a setting it can see only on
the message (``no_ack``) is judged there. Rendered into docs/adapters/kombu.md.
"""

from __future__ import annotations

from typing import Any

from kombu.message import Message

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable, equals

__all__ = ["KOMBU_SETTLEMENT", "acked_on_delivery", "check_delivery"]

KOMBU_SETTLEMENT = SettlementTable(
    "kombu",
    (
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


def check_delivery(message: Message, where: str) -> None:
    """Refuse a delivery whose consumer settings the table does not know to be safe.

    Raises:
        ConfigurationError: naming the setting and its safe values.
    """
    KOMBU_SETTLEMENT.check({"no_ack": acked_on_delivery(message)}, where)
