"""The Celery app and the guarded task of the reference Django project.

``inbox_task`` is the Celery adapter's decorator; with the Django store its
session factory is ``inbox.session``: each delivery runs in
``transaction.atomic()`` on Django's connection, the body included, and the
message is acked only after that block commits. The task also puts a
receipt e-mail in the outbox, in the same block.
"""

from __future__ import annotations

import os
import time
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "integrations.django.settings")
django.setup()

from celery import Celery, signals  # noqa: E402
from django.conf import settings  # noqa: E402
from kombu import Exchange, Queue  # noqa: E402

from inboxguard.adapters.celery import inbox_task  # noqa: E402
from inboxguard.django import inbox, outbox  # noqa: E402
from integrations.django.shop.models import Payment  # noqa: E402

TASK_NAME = "shop.apply_payment"

app = Celery("shop")
app.conf.update(
    broker_url=settings.CELERY_BROKER_URL,
    broker_connection_retry_on_startup=True,
    task_default_queue=settings.CELERY_QUEUE,
    task_queues=[
        Queue(
            settings.CELERY_QUEUE,
            Exchange(settings.CELERY_QUEUE, type="direct"),
            routing_key=settings.CELERY_QUEUE,
            queue_arguments={
                "x-dead-letter-exchange": f"{settings.CELERY_QUEUE}.dlx",
                "x-dead-letter-routing-key": f"{settings.CELERY_QUEUE}.dead",
            }
            if settings.CELERY_BROKER_URL.startswith("amqp")
            else None,
        )
    ],
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
)


@inbox_task(
    inbox,
    session_factory=inbox.session,
    command_id="payment_id",
    consumer="shop.apply_payment",
    name=TASK_NAME,
)
def apply_payment(payment_id: str, account: str, amount: int) -> dict[str, Any]:
    """Apply a payment and queue its receipt, once per payment ID."""
    Payment.objects.create(payment_id=payment_id, account=account, amount=amount)
    outbox.add(
        command_id=f"receipt:{payment_id}",
        destination="emails.receipt",
        payload={"account": account, "amount": amount},
    )
    return {"payment_id": payment_id, "amount": amount}


@signals.worker_ready.connect
def declare_dead_letter(**_: Any) -> None:
    """Declare where RabbitMQ puts the deliveries the guard rejected (a payload
    mismatch, a message older than the evidence): ``<queue>.dead``."""
    if not settings.CELERY_BROKER_URL.startswith("amqp"):
        return
    dead = Queue(
        f"{settings.CELERY_QUEUE}.dead",
        Exchange(f"{settings.CELERY_QUEUE}.dlx", type="direct"),
        routing_key=f"{settings.CELERY_QUEUE}.dead",
    )
    with app.connection_for_write() as conn:
        dead.bind(conn.default_channel).declare()


@signals.task_postrun.connect
def _hang_after_commit(task: Any = None, args: Any = (), **_: Any) -> None:
    # After the task's atomic() block committed, before the parent acks: a
    # kill -9 here leaves a committed, unacked delivery.
    if getattr(task, "name", None) == TASK_NAME and args and args[0] == settings.HANG_AFTER_COMMIT:
        print(f"hang {args[0]}", flush=True)
        time.sleep(3600)
