"""The reference Celery app with ``billing.charge_invoice`` added:
``celery -A integrations.ledger.celery_app worker``."""

from __future__ import annotations

from integrations.celery.settings import Settings, create_app

settings = Settings.from_env()
app = create_app(settings)
app.conf.include = [*app.conf.include, "integrations.ledger.celery_charges"]
