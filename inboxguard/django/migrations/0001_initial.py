"""The store's tables: created with the library's own DDL, named from
``INBOXGUARD["TABLE_PREFIX"]``.

The models are unmanaged (the library owns the tables' definition), so the
operation that creates the tables is :func:`create_tables`, run on the
database of ``INBOXGUARD["DATABASE"]`` only. The models' ``db_table`` in
this migration's state is read from the settings when the migration loads,
as in the models, so a project with its own prefix never gets a migration
to generate for this app.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

import inboxguard.django.models
from inboxguard.django._config import store_settings
from inboxguard.django._tables import create_tables, drop_tables, table_names

_NAMES = table_names()


def _create(apps: Any, schema_editor: Any) -> None:
    conf = store_settings(require_retention=False)
    if schema_editor.connection.alias == conf.database:
        create_tables(schema_editor, conf.table_prefix)


def _drop(apps: Any, schema_editor: Any) -> None:
    conf = store_settings(require_retention=False)
    if schema_editor.connection.alias == conf.database:
        drop_tables(schema_editor, conf.table_prefix)


class Migration(migrations.Migration):  # type: ignore[misc]
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.RunPython(_create, _drop),
        migrations.CreateModel(
            name="InboxEvidence",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "consumer",
                        "command_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("consumer", models.CharField(max_length=255)),
                ("command_id", models.CharField(max_length=255)),
                ("digest", models.CharField(max_length=71)),
                ("result", models.TextField(null=True)),
                ("processed_at", inboxguard.django.models.UtcDateTimeField()),
                ("expires_at", inboxguard.django.models.UtcDateTimeField()),
                ("result_expires_at", inboxguard.django.models.UtcDateTimeField(null=True)),
            ],
            options={
                "verbose_name": "inbox evidence",
                "verbose_name_plural": "inbox evidence",
                "db_table": _NAMES.inbox,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="OutboxMessage",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("command_id", models.CharField(max_length=255, unique=True)),
                ("destination", models.CharField(max_length=255)),
                ("payload", models.TextField(null=True)),
                ("headers", models.TextField(null=True)),
                ("digest", models.CharField(max_length=71)),
                ("created_at", inboxguard.django.models.UtcDateTimeField()),
                ("due_at", inboxguard.django.models.UtcDateTimeField(null=True)),
                ("attempts", models.IntegerField(default=0)),
                ("lease_token", models.CharField(max_length=32, null=True)),
                ("last_error", models.TextField(null=True)),
                ("delivered_at", inboxguard.django.models.UtcDateTimeField(null=True)),
                ("receipt", models.TextField(null=True)),
                ("dead_at", inboxguard.django.models.UtcDateTimeField(null=True)),
                ("compacted_at", inboxguard.django.models.UtcDateTimeField(null=True)),
            ],
            options={
                "verbose_name": "outbox message",
                "db_table": _NAMES.outbox,
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="QuarantineRecord",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("consumer", models.CharField(max_length=255)),
                ("command_id", models.CharField(max_length=255)),
                ("reason", models.CharField(max_length=64)),
                ("incoming_digest", models.CharField(max_length=71)),
                ("stored_digest", models.CharField(max_length=71, null=True)),
                ("first_seen_at", inboxguard.django.models.UtcDateTimeField()),
                ("last_seen_at", inboxguard.django.models.UtcDateTimeField()),
                ("occurrences", models.IntegerField()),
                ("status", models.CharField(max_length=16)),
                ("details", models.TextField(null=True)),
            ],
            options={
                "verbose_name": "quarantined message",
                "db_table": _NAMES.quarantine,
                "managed": False,
            },
        ),
    ]
