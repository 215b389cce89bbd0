"""The record of operators' quarantine releases and resolutions (who, why,
when): the library's ``<prefix>quarantine_actions`` table, created with its
own DDL on the store's database, like the tables of ``0001``."""

from __future__ import annotations

from typing import Any

from django.db import migrations

from inboxguard.django._config import store_settings
from inboxguard.django._tables import create_tables
from inboxguard.sql.tables import inbox_tables


def _create(apps: Any, schema_editor: Any) -> None:
    conf = store_settings(require_retention=False)
    if schema_editor.connection.alias == conf.database:
        create_tables(schema_editor, conf.table_prefix)


def _drop(apps: Any, schema_editor: Any) -> None:
    conf = store_settings(require_retention=False)
    if schema_editor.connection.alias == conf.database:
        name = inbox_tables(conf.table_prefix).quarantine_actions.name
        schema_editor.execute(f"DROP TABLE {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):  # type: ignore[misc]
    dependencies = [("inboxguard", "0001_initial")]

    operations = [migrations.RunPython(_create, _drop)]
