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
- ``queue=``: a queue the app's ``task_queues`` declares is used as declared
  there. Any other name is never declared by the producer (a declaration
  without the worker's arguments, such as its ``x-dead-letter-exchange``,
  would fail with ``PRECONDITION_FAILED``): on RabbitMQ the transport checks
  once, passively, that the queue exists, and publishes to it through the
  default exchange. On Redis, which has no queue arguments, Celery declares it.
- Task names: a ``destination`` that no worker registers still reaches the
  queue; the worker then discards it as an unregistered task. Neither broker
  can tell the producer, so check task names where rows are added.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from celery import Celery
from kombu.entity import Exchange, Queue

from inboxguard.adapters._transport import split_payload
from inboxguard.errors import ConfigurationError
from inboxguard.outbox import OutboxMessage

__all__ = ["CeleryTransport"]


class CeleryTransport:
    """``transport(message)`` that sends a Celery task named by ``destination``.

    Args:
        app: the producing Celery app (its broker connection is used).
        queue: send every task to this queue instead of the app's routing;
            declared as the app's ``task_queues`` declare it, else never
            declared by the producer (checked passively on RabbitMQ).
        options: extra ``send_task`` keyword arguments (``priority``,
            ``expires``...); ``task_id`` and ``headers`` are set here.

    Raises:
        ConfigurationError: the app's broker is RabbitMQ and publisher
            confirms are off. On the first publish, raised (the row stays
            undelivered) when ``queue`` does not exist on RabbitMQ.
    """

    def __init__(
        self, app: Celery, *, queue: str | None = None, options: Mapping[str, Any] | None = None
    ) -> None:
        self.amqp = _require_confirms(app)
        self.app = app
        self.queue = queue
        self.options = dict(options or {})
        self._route: str | Queue | None = None

    def __call__(self, message: OutboxMessage) -> dict[str, Any]:
        """Publish the task; return ``{"task_id": ..., "task": ...}``."""
        args, kwargs = split_payload(message.payload)
        options = dict(self.options)
        if self.queue is not None:
            options["queue"] = self._queue(self.queue)
        result = self.app.send_task(
            message.destination,
            args=args,
            kwargs=kwargs,
            task_id=message.command_id,
            headers=dict(message.headers),
            **options,
        )
        return {"task_id": result.id, "task": message.destination}

    def _queue(self, name: str) -> str | Queue:
        """The route for ``queue=``: the app's own declaration of it, or the
        queue as it exists on the broker (checked once), never re-declared."""
        if self._route is None:
            declared = bool(self.app.conf.task_queues) and name in self.app.amqp.queues
            if declared or not self.amqp:  # Redis declares no arguments: nothing to clash
                self._route = name
            else:
                _require_queue(self.app, name)
                default = Exchange("", type="direct")  # type: ignore[no-untyped-call]
                self._route = Queue(  # type: ignore[no-untyped-call]
                    name, exchange=default, routing_key=name, no_declare=True
                )
        return self._route


def _require_queue(app: Celery, name: str) -> None:
    """Check passively that RabbitMQ has queue ``name``."""
    with app.connection_for_write() as conn:
        try:
            conn.default_channel.queue_declare(queue=name, passive=True)
        except conn.channel_errors as error:
            msg = (
                f"CeleryTransport(queue={name!r}): RabbitMQ has no queue {name!r} ({error});"
                " start the worker that consumes it first (it declares the queue with its"
                " dead-letter arguments), or list the queue in app.conf.task_queues with"
                " the worker's queue_arguments; the outbox row stays undelivered"
            )
            raise ConfigurationError(msg) from error


def _require_confirms(app: Celery) -> bool:
    """Whether the broker is RabbitMQ (AMQP), once confirms are checked."""
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
    return bool(amqp)
