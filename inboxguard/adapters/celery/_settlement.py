"""The Celery settlement table: each task setting that decides when a guarded
delivery is acked, requeued or dropped, and the values the adapter accepts.

Read at declaration (``check_declared``) and at worker start; rendered into
docs/adapters/celery.md; summarised in the guarantee table.
"""

from __future__ import annotations

from typing import Any

from inboxguard.adapters._settlement import Choice, Setting, SettlementTable, equals

__all__ = [
    "ACCEPT_ACK_OPTION",
    "ACCEPT_EARLY_ACK_OPTION",
    "ACCEPT_LOST_ACK_OPTION",
    "CELERY_SETTLEMENT",
    "check_settlement",
]

#: Task option accepting that Celery acks a failed or timed-out delivery.
ACCEPT_ACK_OPTION = "inbox_accept_ack_on_failure"
#: Task option accepting that the message is acked before the transaction commits.
ACCEPT_EARLY_ACK_OPTION = "inbox_accept_early_ack"
#: Task option accepting that a killed child's message is acked.
ACCEPT_LOST_ACK_OPTION = "inbox_accept_ack_on_worker_lost"

_ON = equals(True)
_OFF = equals(False)


def _failure_ack(name: str) -> Setting:
    return Setting(
        name,
        "task option",
        (
            Choice(
                "False",
                "accepts",
                "a failed delivery is rejected (dead-lettered), a timed-out one requeued",
                _OFF,
            ),
            Choice(
                "True",
                "refuses",
                "Celery acks a delivery that failed or hit its time limit before anything"
                " settled it: the command is lost",
                _ON,
            ),
        ),
        opt_in=ACCEPT_ACK_OPTION,
    )


CELERY_SETTLEMENT = SettlementTable(
    "Celery",
    (
        Setting(
            "acks_late",
            "task option",
            (
                Choice("True", "accepts", "acked only after the transaction commits", _ON),
                Choice(
                    "False",
                    "refuses",
                    "acked before the transaction commits: a crash or rollback loses the"
                    " command, and Reject cannot dead-letter it",
                    _OFF,
                ),
            ),
            opt_in=ACCEPT_EARLY_ACK_OPTION,
        ),
        Setting(
            "reject_on_worker_lost",
            "task option",
            (
                Choice(
                    "True",
                    "accepts",
                    "a killed child's message goes back to the queue; the inbox makes a"
                    " committed one a duplicate",
                    _ON,
                ),
                Choice(
                    "False",
                    "refuses",
                    "a killed child's message is acked before anything committed: the"
                    " command is lost",
                    _OFF,
                ),
            ),
            opt_in=ACCEPT_LOST_ACK_OPTION,
        ),
        Setting(
            "retry_on_worker_lost",
            "task option",
            (
                Choice(
                    "False",
                    "accepts",
                    "a killed child's message is requeued (reject_on_worker_lost)",
                    _OFF,
                ),
                Choice(
                    "True",
                    "refuses",
                    "once max_retries is spent (a database outage alone can spend it)"
                    " Celery rejects the killed child's message without requeue, the"
                    " adapter never sees it, and on Redis it is deleted: the command is"
                    " lost; bound a poison loop on the broker instead (x-delivery-limit)",
                    _ON,
                ),
            ),
        ),
        _failure_ack("acks_on_failure_or_timeout"),
        _failure_ack("acks_on_failure"),
        _failure_ack("acks_on_timeout"),
    ),
)


def check_settlement(task: Any) -> None:
    """Refuse a guarded task whose settlement settings are not known to be safe.

    Raises:
        ConfigurationError: a setting's value is refused by
            :data:`CELERY_SETTLEMENT` (without its opt-in), or no row knows it.
    """
    name = getattr(task, "name", None) or getattr(task, "__name__", "?")
    values = {s.name: getattr(task, s.name, None) for s in CELERY_SETTLEMENT.settings}
    accepted = {
        option: bool(getattr(task, option, False))
        for option in (ACCEPT_ACK_OPTION, ACCEPT_EARLY_ACK_OPTION, ACCEPT_LOST_ACK_OPTION)
    }
    CELERY_SETTLEMENT.check(values, f"task {name!r}", accepted=accepted)
