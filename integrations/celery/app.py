"""The Celery app of the reference worker: ``celery -A integrations.celery.app worker``."""

from __future__ import annotations

from typing import Any

from celery import signals

from integrations.celery.settings import Settings, create_app, declare_dead_letter

settings = Settings.from_env()
app = create_app(settings)


@signals.celeryd_after_setup.connect
def _declare_dead_letter(**_: Any) -> None:
    declare_dead_letter(app, settings)
