"""Outbox transport for Celery: ``app.send_task`` under the command ID.

The command ID becomes the task id (so the result backend, revocation and
the worker's ``task.request.id`` all name the business command) and the
``x-inbox-command-id`` header; the digest travels in ``x-inbox-digest``. The
row's ``destination`` is the task name; routing follows the app's
``task_routes`` unless ``queue`` is given.

On RabbitMQ the transport needs publisher confirms
(``broker_transport_options={"confirm_publish": True}``; an app without them
is refused), so a receipt means "the broker has it". Celery retries a failed
publish per ``task_publish_retry_policy`` and then raises, which leaves the
row undelivered for a later attempt.

What the transport can and cannot see:

- Routing: Celery declares the queue it routes a task to before publishing
  (``task_create_missing_queues``, on by default), on RabbitMQ and on Redis,
  so a publish always reaches a queue; with a routing setup that does not
  declare, a message RabbitMQ cannot route is dropped without a return,
  because Celery's producer registers no return handler.
- Task names: a ``destination`` that no worker registers still reaches the
  queue; the worker then discards it as an unregistered task. Neither broker
  can tell the producer, so check task names where rows are added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery import Celery

from inboxguard.adapters._transport import split_payload
from inboxguard.errors import ConfigurationError
from inboxguard.outbox import OutboxMessage

__all__ = ["CeleryTransport"]


class CeleryTransport:
    """``transport(message)`` that sends a Celery task named by ``destination``.

    Args:
        app: the producing Celery app (its broker connection is used).
        queue: send every task to this queue instead of the app's routing.
        options: extra ``send_task`` keyword arguments (``priority``,
            ``expires``...); ``task_id`` and ``headers`` are set here.

    Raises:
        ConfigurationError: the app's broker is RabbitMQ and publisher
            confirms are off.
    """

    def __init__(
        self, app: Celery, *, queue: str | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        _require_confirms(app)
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


def _require_confirms(app: Celery) -> None:
    with app.connection_for_write() as conn:
        amqp = conn.transport.driver_type == "amqp"
    options = app.conf.broker_transport_options or {}
    if amqp and not options.get("confirm_publish"):
        msg = (
            "CeleryTransport needs publisher confirms on RabbitMQ, or a task the broker"
            " never took would be recorded as delivered: set"
            ' app.conf.broker_transport_options = {"confirm_publish": True}'
        )
        raise ConfigurationError(msg)
