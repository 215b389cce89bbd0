"""Where a guarded task's refused messages go on RabbitMQ: ``doctor``'s check.

A refused delivery is rejected without requeue. RabbitMQ moves it to the
queue's dead-letter exchange when the queue declares one; otherwise, or when
that exchange routes nowhere, the message is dropped (the quarantine record
still holds it). Redis and SQS have no dead-letter queue.
"""

from __future__ import annotations

import contextlib
from typing import Any

from inboxguard.adapters.celery._task import InboxTask

__all__ = ["dead_letter_findings"]

_DLX = "x-dead-letter-exchange"
_DLK = "x-dead-letter-routing-key"


def dead_letter_findings(app: Any) -> list[tuple[str, str]]:
    """``(status, detail)`` for each queue a guarded task of ``app`` is routed
    to: ``ok``, ``warn`` or ``fail``; one ``ok`` when the broker is not RabbitMQ.
    The broker is asked passively: nothing is declared."""
    queues: dict[str, tuple[Any, list[str]]] = {}
    for name in sorted(app.tasks):
        task = app.tasks[name]
        if isinstance(task, InboxTask) and task.inbox is not None:
            queue = app.amqp.router.route({}, name).get("queue")
            if queue is not None:
                queues.setdefault(queue.name, (queue, []))[1].append(name)
    try:
        with app.connection_for_read() as conn:
            if conn.transport.driver_type != "amqp":
                kind = conn.transport.driver_type
                return [
                    ("ok", f"broker {kind}: no dead-letter queues, the quarantine is the record")
                ]
            return [_finding(conn, queue, tasks) for queue, tasks in queues.values()]
    except Exception as error:
        return [("warn", f"dead-letter queues unchecked: the broker cannot be reached ({error})")]


def _finding(conn: Any, queue: Any, tasks: list[str]) -> tuple[str, str]:
    where = f"queue {queue.name!r} ({', '.join(tasks)})"
    arguments = queue.queue_arguments or {}
    if _DLX not in arguments:
        return (
            "warn",
            f"{where} declares no {_DLX} in task_queues: RabbitMQ drops a refused message"
            f" (the quarantine record keeps it); declare the queue with queue_arguments"
            f" {{'{_DLX}': ..., '{_DLK}': ...}} and its dead-letter queue",
        )
    exchange = str(arguments[_DLX])
    key = str(arguments.get(_DLK, queue.name))
    if exchange and not _exists(conn, "exchange_declare", exchange=exchange, type="direct"):
        return ("fail", f"{where}: dead-letter exchange {exchange!r} does not exist: declare it")
    if not _exists(conn, "queue_declare", queue=key):
        via = f"exchange {exchange!r}" if exchange else "the default exchange"
        status = "fail" if not exchange else "warn"
        return (
            status,
            f"{where}: dead letters go to {via} with routing key {key!r}, but there is no queue"
            f" {key!r}: RabbitMQ drops them unless a queue is bound there; declare it",
        )
    return ("ok", f"{where}: dead letters go to queue {key!r}")


def _exists(conn: Any, method: str, **arguments: Any) -> bool:
    """Whether a passive declaration succeeds (each on a channel of its own:
    a failed one closes its channel)."""
    channel = conn.channel()
    try:
        getattr(channel, method)(passive=True, **arguments)
    except conn.channel_errors:
        return False
    finally:
        with contextlib.suppress(Exception):  # the broker may have closed it already
            channel.close()
    return True
