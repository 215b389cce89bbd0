"""settings.py of a Django project that uses the inboxguard store."""

from datetime import timedelta

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "inboxguard.django",
]
INBOXGUARD = {
    "RETENTION": timedelta(days=7),  # required: longer than any redelivery or replay
    "TABLE_PREFIX": "inboxguard_",  # optional (this default)
    "DATABASE": "default",  # optional: the alias the tables live in
}
