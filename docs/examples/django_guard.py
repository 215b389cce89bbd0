"""The Django store in one script: a guarded handler inside atomic(), a
duplicate, a refused mismatch whose quarantine record survives, and an
outbox row that commits with the change.

Run: python docs/examples/django_guard.py (a throwaway SQLite file in WAL
mode: quarantine records are written on a connection of their own, beside
the open atomic() block, which SQLite allows in WAL mode).
"""

from __future__ import annotations

import contextlib
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

from django.core.management import call_command
from django.db import connection, transaction

from inboxguard import PayloadMismatchError
from inboxguard.django import inbox, outbox


def charge(order_id: str, amount: int) -> dict[str, int]:
    """Apply a charge once per order, and queue its receipt with it."""
    with transaction.atomic():
        with inbox.guard(
            consumer="billing", command_id=order_id, payload={"amount": amount}
        ) as entry:
            if entry.duplicate:
                return entry.result  # type: ignore[no-any-return]
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO charges VALUES (%s, %s)", [order_id, amount])
            outbox.add(
                command_id=f"receipt:{order_id}",
                destination="emails",
                payload={"order": order_id},
            )
            entry.result = {"charged": amount}
            return entry.result  # type: ignore[no-any-return]


def main() -> None:
    """Run the scenario and check what it promises."""
    keep = connection.cursor()
    call_command("migrate", verbosity=0)  # creates the inbox, quarantine and outbox tables
    keep.execute("CREATE TABLE charges (order_id TEXT, amount INTEGER)")

    assert charge("order-1", 30) == {"charged": 30}
    assert charge("order-1", 30) == {"charged": 30}  # a duplicate: not charged again
    with contextlib.suppress(PayloadMismatchError):
        charge("order-1", 99)  # same order, another amount: refused, quarantined
    keep.execute("SELECT count(*) FROM charges")
    assert keep.fetchone()[0] == 1
    assert [r.reason for r in inbox.quarantined("billing")] == ["payload_mismatch"]
    assert outbox.get("receipt:order-1") is not None
    print("charged once; the mismatch is quarantined; the receipt is in the outbox")
    keep.close()
    connection.close()
    inbox.engine.dispose()
    outbox.engine.dispose()
    FOLDER.cleanup()


if __name__ == "__main__":
    main()
