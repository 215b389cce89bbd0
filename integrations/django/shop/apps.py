"""The reference app: payments applied once per payment ID."""

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "integrations.django.shop"
    label = "shop"
    default_auto_field = "django.db.models.BigAutoField"
