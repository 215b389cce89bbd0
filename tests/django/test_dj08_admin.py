"""DJ8: Django's admin lists the quarantine, shows a record's details, and its
action resolves the selected records (through Inbox.resolve_quarantine),
for a logged-in superuser; it changes and deletes nothing else."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from inboxguard import PayloadMismatchError


@pytest.fixture
def admin_client() -> Iterator[Any]:
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)  # auth, sessions, admin and this app, on "default"
    user = User.objects.create_superuser(f"op{User.objects.count()}", "op@example.com", "pw")
    client = Client()
    client.force_login(user)
    yield client
    user.delete()


def test_dj8_the_admin_shows_and_resolves_the_quarantine(admin_client: Any) -> None:
    from inboxguard.django import inbox
    from inboxguard.django.models import QuarantineRecord

    assert inbox.retention.horizon == dt.timedelta(days=7)  # built from settings
    command = f"adm-{QuarantineRecord.objects.count()}"
    for payload in ({"n": 1}, {"n": 2}):
        try:
            with (
                transaction.atomic(),
                inbox.guard(consumer="c", command_id=command, payload=payload),
            ):
                pass
        except PayloadMismatchError:
            pass
    record = QuarantineRecord.objects.get(command_id=command)
    listing = admin_client.get("/admin/inboxguard/quarantinerecord/?status__exact=open")
    assert listing.status_code == 200
    assert command in listing.content.decode()
    detail = admin_client.get(f"/admin/inboxguard/quarantinerecord/{record.id}/change/")
    assert detail.status_code == 200
    assert record.incoming_digest in detail.content.decode()
    done = admin_client.post(
        "/admin/inboxguard/quarantinerecord/",
        {"action": "resolve", "_selected_action": [str(record.id)]},
        follow=True,
    )
    assert done.status_code == 200
    assert "Resolved 1 of 1" in done.content.decode()
    assert inbox.quarantine_record(record.id).status == "resolved"
    assert admin_client.get("/admin/inboxguard/quarantinerecord/add/").status_code == 403
