"""Outbox transport for Celery: ``app.send_task`` under the command ID.

The command ID becomes the task id (so the result backend, revocation and
the worker's ``task.request.id`` all name the business command) and the
``x-inbox-command-id`` header; the digest travels in ``x-inbox-digest``. The
row's ``destination`` is the task name; routing follows the app's
``task_routes`` unless ``queue`` is given.

For a receipt that means "the broker has it", enable publisher confirms on
RabbitMQ (``broker_transport_options={"confirm_publish": True}``); Celery
retries a failed publish per ``task_publish_retry_policy`` and then raises,
which leaves the row undelivered for a later attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery import Celery

from inboxguard.adapters._transport import split_payload
from inboxguard.outbox import OutboxMessage

__all__ = ["CeleryTransport"]


class CeleryTransport:
    """``transport(message)`` that sends a Celery task named by ``destination``.

    Args:
        app: the producing Celery app (its broker connection is used).
        queue: send every task to this queue instead of the app's routing.
        options: extra ``send_task`` keyword arguments (``priority``,
            ``expires``...); ``task_id`` and ``headers`` are set here.
    """

    def __init__(
        self, app: Celery, *, queue: str | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        self.app = app
        self.queue = queue
        self.options = dict(options or {})

    def __call__(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish the task; return ``{"task_id": ..., "task": ...}``."""
        args, kwargs = split_payload(message.payload)
        options = dict(self.options)
        if self.queue is not None:
            options["queue"] = self.queue
        result = self.app.send_task(
            message.destination,
            args=args,
            kwargs=kwargs,
            task_id=message.command_id,
            headers=dict(message.headers),
            **options,
        )
        return {"task_id": result.id, "task": message.destination}
