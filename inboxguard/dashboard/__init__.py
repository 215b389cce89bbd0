"""Operator views over the read model: the screen and the database gauges.

``inboxguard dashboard --db URL --port N`` serves the screen;
:func:`dashboard_app` builds the same app for an ASGI server of your own.
Starlette and Jinja2 (the ``dashboard`` extra) are imported only when an app
is built. :func:`observe_database` reports the tables' figures as
OpenTelemetry gauges (the ``otel`` extra, imported only when called).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard.dashboard._gauges import observe_database

__all__ = ["dashboard_app", "observe_database"]


def dashboard_app(
    engine: Engine,
    *,
    token: str | None = None,
    table_prefix: str = "inboxguard_",
    sample_every: dt.timedelta = dt.timedelta(seconds=15),
    horizon: dt.timedelta | None = None,
    allowed_hosts: Iterable[str] = (),
) -> Any:
    """Build the operator screen for the inboxguard tables of ``engine``.

    Read-only unless ``token`` is given; then releasing or resolving a
    quarantine record takes that token (in the POSTed form, never the query
    string), a confirmation, and the operator's name and reason, which are
    recorded with the action. Every page reads without JavaScript, escapes
    whatever the database holds, and never shows the database URL. The
    outbox chart is sampled every ``sample_every`` while the app runs;
    ``horizon`` (the inbox's retention horizon) is shown beside the oldest
    evidence.

    It answers only requests naming one of its own hosts: ``localhost``,
    ``127.0.0.1``, ``::1`` and each of ``allowed_hosts`` (any other ``Host``
    gets 400, so a page of another site that resolves its name to this
    machine reads nothing). The token must be at least 16 characters; after
    five wrong tokens in a minute a client's actions are refused (429) until
    the minute has passed. Mounted under a path (ASGI ``root_path``, e.g.
    ``/ops``), its links, forms and stylesheet stay under that path.

    Raises:
        ConfigurationError: a bad argument, or the ``dashboard`` extra
            (starlette, jinja2, python-multipart) is not installed.
    """
    from inboxguard.dashboard._app import build_app  # noqa: PLC0415

    return build_app(
        engine,
        token=token,
        table_prefix=table_prefix,
        sample_every=sample_every,
        horizon=horizon,
        allowed_hosts=allowed_hosts,
    )
