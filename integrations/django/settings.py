"""Settings of the reference Django project, from environment variables.

================================  ==============================================================
``INBOXGUARD_DJANGO_DB``          SQLAlchemy-style URL of the database: ``postgresql://...``,
                                  ``mysql://...`` or ``sqlite:///path`` (default: ``shop.db``)
``INBOXGUARD_BROKER_URL``         ``amqp://...`` or ``redis://...`` (default: local RabbitMQ)
``INBOXGUARD_QUEUE``              the queue the worker consumes (``inboxguard-django``)
``INBOXGUARD_HANG_AFTER_COMMIT``  a payment ID whose task stops for good after its commit,
                                  before the ack (tests ``kill -9`` the worker there)
================================  ==============================================================

The parts that matter for inboxguard: ``"inboxguard.django"`` in
``INSTALLED_APPS`` (its migration creates the inbox, quarantine and outbox
tables) and ``INBOXGUARD`` (retention of the evidence, table prefix,
database alias).
"""

from __future__ import annotations

import datetime as dt
import os
from urllib.parse import urlsplit

DEBUG = False
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "reference-project-only")
USE_TZ = True
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "integrations.django.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "inboxguard.django",
    "integrations.django.shop",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


def database(url: str) -> dict[str, object]:
    """A ``DATABASES`` entry from a URL."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+")[0]
    if scheme == "sqlite":
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": parts.path.lstrip("/") or "shop.db",
            # WAL: quarantine records are written beside an open transaction.
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL"},
        }
    engine = {"postgresql": "postgresql", "mysql": "mysql"}[scheme]
    entry: dict[str, object] = {
        "ENGINE": f"django.db.backends.{engine}",
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username or "",
        "PASSWORD": parts.password or "",
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
    }
    if engine == "mysql":
        entry["OPTIONS"] = {"charset": "utf8mb4"}
    return entry


DATABASES = {"default": database(os.environ.get("INBOXGUARD_DJANGO_DB", "sqlite:///shop.db"))}

#: The evidence is kept longer than any redelivery or dead-letter replay.
INBOXGUARD = {
    "RETENTION": dt.timedelta(days=7),
    "TABLE_PREFIX": "inboxguard_",
    "DATABASE": "default",
}

CELERY_BROKER_URL = os.environ.get("INBOXGUARD_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672//")
CELERY_QUEUE = os.environ.get("INBOXGUARD_QUEUE", "inboxguard-django")
HANG_AFTER_COMMIT = os.environ.get("INBOXGUARD_HANG_AFTER_COMMIT", "")
