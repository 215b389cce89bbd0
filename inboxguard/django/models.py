"""Django models of the store's tables, for the admin and the ORM.

The models are unmanaged: the tables are the library's own, created by this
app's migration with the library's DDL (:mod:`._tables`), and their names
follow ``INBOXGUARD["TABLE_PREFIX"]``. Datetimes are stored as naive UTC (as
the rest of the library stores them) and read back as aware UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import models

from inboxguard.django._tables import table_names

__all__ = ["InboxEvidence", "OutboxMessage", "QuarantineRecord", "UtcDateTimeField"]

_NAMES = table_names()


class UtcDateTimeField(models.DateTimeField):  # type: ignore[misc]
    """A datetime stored as naive UTC, read back as aware UTC on every database."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        """Attach UTC to a naive value."""
        if isinstance(value, dt.datetime) and value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        """Store naive UTC, as the library does (SQLite: its text format)."""
        if not isinstance(value, dt.datetime):
            return super().get_db_prep_value(value, connection, prepared)
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        if connection.vendor == "sqlite":
            return value.strftime("%Y-%m-%d %H:%M:%S.%f")
        return value


class InboxEvidence(models.Model):  # type: ignore[misc]
    """One processed command: its digest, stored result and expiry."""

    pk = models.CompositePrimaryKey("consumer", "command_id")
    consumer = models.CharField(max_length=255)
    command_id = models.CharField(max_length=255)
    digest = models.CharField(max_length=71)
    result = models.TextField(null=True)
    processed_at = UtcDateTimeField()
    expires_at = UtcDateTimeField()
    result_expires_at = UtcDateTimeField(null=True)

    class Meta:
        """Unmanaged: the app's migration creates the table."""

        managed = False
        db_table = _NAMES.inbox
        verbose_name = "inbox evidence"
        verbose_name_plural = "inbox evidence"


class QuarantineRecord(models.Model):  # type: ignore[misc]
    """A message the inbox refused, kept for an operator to inspect and resolve."""

    id = models.AutoField(primary_key=True)
    consumer = models.CharField(max_length=255)
    command_id = models.CharField(max_length=255)
    reason = models.CharField(max_length=64)
    incoming_digest = models.CharField(max_length=71)
    stored_digest = models.CharField(max_length=71, null=True)
    first_seen_at = UtcDateTimeField()
    last_seen_at = UtcDateTimeField()
    occurrences = models.IntegerField()
    status = models.CharField(max_length=16)
    details = models.TextField(null=True)

    class Meta:
        """Unmanaged: the app's migration creates the table."""

        managed = False
        db_table = _NAMES.quarantine
        verbose_name = "quarantined message"

    def __str__(self) -> str:
        """consumer/command_id (reason)."""
        return f"{self.consumer}/{self.command_id} ({self.reason})"


class OutboxMessage(models.Model):  # type: ignore[misc]
    """An outgoing command, delivered by the dispatcher."""

    id = models.BigAutoField(primary_key=True)
    command_id = models.CharField(max_length=255, unique=True)
    destination = models.CharField(max_length=255)
    payload = models.TextField(null=True)
    headers = models.TextField(null=True)
    digest = models.CharField(max_length=71)
    created_at = UtcDateTimeField()
    due_at = UtcDateTimeField(null=True)
    attempts = models.IntegerField(default=0)
    lease_token = models.CharField(max_length=32, null=True)
    last_error = models.TextField(null=True)
    delivered_at = UtcDateTimeField(null=True)
    receipt = models.TextField(null=True)
    dead_at = UtcDateTimeField(null=True)
    compacted_at = UtcDateTimeField(null=True)

    class Meta:
        """Unmanaged: the app's migration creates the table."""

        managed = False
        db_table = _NAMES.outbox
        verbose_name = "outbox message"

    def __str__(self) -> str:
        """command_id -> destination."""
        return f"{self.command_id} -> {self.destination}"
