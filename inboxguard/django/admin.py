"""The admin: quarantined messages an operator inspects and resolves, and
the outbox's rows, read-only.

Resolving goes through :meth:`inboxguard.Inbox.resolve_quarantine` of the
store built from the settings, the operation the ``inboxguard quarantine``
command runs, so the admin and the command cannot disagree on what resolving
means. Nothing else is editable: records are written by the guard and
removed by purge.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages

from inboxguard.django.models import OutboxMessage, QuarantineRecord

__all__ = ["OutboxMessageAdmin", "QuarantineRecordAdmin"]


class _ReadOnly(admin.ModelAdmin):  # type: ignore[misc]
    """Shows rows; never adds, changes or deletes them."""

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        """Rows are written by the library only."""
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        """Viewing only (resolving is an action)."""
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        """Purge removes rows, never the admin."""
        return False


@admin.register(QuarantineRecord)
class QuarantineRecordAdmin(_ReadOnly):
    """Quarantined messages, open ones first to look at; the action resolves them."""

    list_display = (
        "id",
        "consumer",
        "command_id",
        "reason",
        "status",
        "occurrences",
        "first_seen_at",
        "last_seen_at",
    )
    list_filter = ("status", "reason", "consumer")
    search_fields = ("consumer", "command_id")
    ordering = ("-id",)
    actions = ("resolve",)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        """Staff with the model's view or change permission."""
        return bool(super().has_view_permission(request, obj))

    @admin.action(description="Resolve the selected quarantined messages")  # type: ignore[untyped-decorator]
    def resolve(self, request: Any, queryset: Any) -> None:
        """Mark the selected open records resolved (the quarantine command's resolve)."""
        from inboxguard.django import inbox

        ids = list(queryset.values_list("id", flat=True))
        done = sum(1 for record_id in ids if inbox.resolve_quarantine(record_id))
        level = messages.SUCCESS if done == len(ids) else messages.WARNING
        self.message_user(
            request,
            f"Resolved {done} of {len(ids)} selected record(s) (others were not open).",
            level,
        )


@admin.register(OutboxMessage)
class OutboxMessageAdmin(_ReadOnly):
    """Outgoing commands and their delivery state."""

    list_display = ("id", "command_id", "destination", "attempts", "created_at", "delivered_at")
    search_fields = ("command_id", "destination")
    ordering = ("-id",)
