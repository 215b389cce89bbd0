"""The Django app of inboxguard (``INSTALLED_APPS = [..., "inboxguard.django"]``)."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["InboxGuardConfig"]


class InboxGuardConfig(AppConfig):  # type: ignore[misc]
    """Models, migrations and admin of the inbox, quarantine and outbox tables."""

    name = "inboxguard.django"
    label = "inboxguard"
    verbose_name = "inboxguard"
    default_auto_field = "django.db.models.BigAutoField"
