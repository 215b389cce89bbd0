"""A Celery task guarded by the Django store: ``session_factory=inbox.session``
runs each delivery in ``transaction.atomic()`` on Django's connection.

Run: python docs/examples/django_celery_task.py (a throwaway SQLite file; the
task runs in this process with ``apply()``, as a worker would run it).
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import django
from django.conf import settings

FOLDER = tempfile.TemporaryDirectory()
settings.configure(
    USE_TZ=True,
    INSTALLED_APPS=["inboxguard.django"],
    DATABASES={
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(FOLDER.name) / "shop.db"),
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL"},
        }
    },
    INBOXGUARD={"RETENTION": dt.timedelta(days=7)},
)
django.setup()

from celery import Celery
from django.core.management import call_command
from django.db import connection

from inboxguard.adapters.celery import inbox_task
from inboxguard.django import inbox

app = Celery("shop", broker="memory://", set_as_current=True)


@inbox_task(inbox, session_factory=inbox.session, command_id="payment_id", consumer="payments")
def apply_payment(payment_id: str, amount: int) -> int:
    """Runs inside the task's atomic() block, once per payment ID."""
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO payments VALUES (%s, %s)", [payment_id, amount])
    return amount


def main() -> None:
    """Run the scenario and check what it promises."""
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE payments (payment_id TEXT, amount INTEGER)")
    first = apply_payment.apply(args=["pay-1", 5])
    again = apply_payment.apply(args=["pay-1", 5])  # a redelivery: returns the stored result
    assert first.get() == again.get() == 5
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM payments")
        assert cursor.fetchone()[0] == 1
    print("applied once; the redelivery returned the stored result")
    connection.close()
    inbox.engine.dispose()
    FOLDER.cleanup()


if __name__ == "__main__":
    main()
