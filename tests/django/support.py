"""Django, configured once per test process, with a database alias per service.

``default`` is a SQLite file of this process; ``postgresql`` and ``mysql`` are
added on first use, on the session databases of tests/conftest.py (the
services' own fixtures skip when they are down). MariaDB is reached through
PyMySQL standing in for mysqlclient.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

PREFIX = "igdj_"
_STATE: dict[str, Any] = {}


def configure() -> None:
    """Configure Django for this process (idempotent)."""
    if _STATE.get("configured"):
        return
    import pymysql

    pymysql.version_info = (2, 2, 1, "final", 0)  # Django checks mysqlclient's version
    pymysql.install_as_MySQLdb()
    import django
    from django.conf import settings

    folder = Path(tempfile.mkdtemp(prefix="igdj"))
    settings.configure(
        DEBUG=False,
        USE_TZ=True,
        SECRET_KEY="tests-only",
        ROOT_URLCONF="tests.django.urls",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": str(folder / "db"),
                "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL"},
            }
        },
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "inboxguard.django",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        TEMPLATES=[
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
        ],
        INBOXGUARD={"RETENTION": dt.timedelta(days=7), "TABLE_PREFIX": PREFIX},
    )
    django.setup()
    _STATE["configured"] = True
    _STATE["folder"] = folder


def add_alias(alias: str, url: str) -> str:
    """Add a Django database alias for a SQLAlchemy URL (once per process)."""
    configure()
    from django.db import connections

    if alias in connections.settings:
        return alias
    u = make_url(url)
    engine = {"postgresql": "postgresql", "mysql": "mysql"}[u.get_backend_name()]
    entry = {
        "ENGINE": f"django.db.backends.{engine}",
        "NAME": u.database,
        "USER": u.username or "",
        "PASSWORD": u.password or "",
        "HOST": u.host or "",
        "PORT": str(u.port or ""),
    }
    if engine == "mysql":
        entry["OPTIONS"] = {"charset": "utf8mb4"}
    current = dict(connections.settings)
    connections.settings[alias] = connections.configure_settings({**current, alias: entry})[alias]
    return alias


def add_sqlite_alias(alias: str, path: str) -> str:
    """Add (or point again) a Django alias on a SQLite file, in its default
    rollback-journal mode."""
    configure()
    from django.db import connections

    entry = {"ENGINE": "django.db.backends.sqlite3", "NAME": path}
    current = dict(connections.settings)
    connections.settings[alias] = connections.configure_settings({**current, alias: entry})[alias]
    if hasattr(connections._connections, alias):
        getattr(connections._connections, alias).close()
        delattr(connections._connections, alias)
    return alias


def close_all() -> None:
    """Close this thread's Django connections."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        conn.close()
