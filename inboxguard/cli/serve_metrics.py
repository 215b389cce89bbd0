"""``inboxguard serve-metrics``: the database-derived gauges on a Prometheus endpoint.

    inboxguard serve-metrics --db URL --port 9464 [--host 127.0.0.1] [--horizon 30d]
                             [--connect-timeout 5]
    inboxguard serve-metrics --app proj.worker:app --port 9464

For deployments whose workers cannot expose metrics themselves: each scrape
reads the inboxguard tables once (``inboxguard.stats``) and reports evidence
rows and the oldest evidence's age per consumer (against ``--horizon``, the
retention horizon, when given), open quarantine records, the outbox backlog,
its oldest unsent row's age and dead rows, effects by state and the oldest
``unknown`` effect's age. ``inboxguard_up`` is 0 when the read failed,
including a database that does not answer within ``--connect-timeout``
seconds (default 5), so a scrape never hangs on a silent server. With
``--app`` (a Celery app, Dramatiq broker or Inbox, as ``doctor`` takes it)
the horizon, the database and the table prefix are the application's inbox's,
unless ``--horizon``, ``--db`` or ``--prefix`` say otherwise. Needs the
``prometheus`` extra; the database URL is never printed, and a malformed URL
or a missing driver is one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard import stats
from inboxguard.cli._app import resolve_object
from inboxguard.cli._args import DB_ENV, add_database, database_url, positive_int
from inboxguard.cli._db import open_engine
from inboxguard.cli._duration import parse_duration
from inboxguard.cli._output import UsageError
from inboxguard.cli._windows import DEFAULT_APP_ATTRS, discover
from inboxguard.errors import ConfigurationError

__all__ = ["database_collector", "register"]

logger = logging.getLogger("inboxguard.metrics")

#: ``--prefix``'s default (see ``add_database``).
DEFAULT_PREFIX = "inboxguard_"
_EXTRA = "serve-metrics needs the 'prometheus' extra: pip install 'inboxguard[prometheus]'"


def register(subparsers: Any) -> None:
    """Add ``serve-metrics`` to the command line."""
    parser = subparsers.add_parser(
        "serve-metrics", help="serve the database-derived gauges for Prometheus"
    )
    add_database(parser, "inbox")
    parser.add_argument("--port", type=port_number, required=True, help="TCP port (0: any free)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--horizon", type=parse_duration, help="the inbox's retention horizon, e.g. 30d"
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        help="your Celery app, Dramatiq broker or Inbox: its inbox gives the horizon, the"
        " database and the prefix (each unless given)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=positive_int,
        default=5,
        metavar="SECONDS",
        help="a database that does not answer within it is inboxguard_up 0 (default 5)",
    )
    parser.set_defaults(func=_serve)


def port_number(text: str) -> int:
    """argparse type: a TCP port, 0 to 65535."""
    if text == "0":
        return 0
    value = positive_int(text)
    if value > 65535:
        msg = f"must be a TCP port (0 to 65535), got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return value


def database_collector(
    engine: Engine, table_prefix: str = "inboxguard_", horizon: dt.timedelta | None = None
) -> Any:
    """A ``prometheus_client`` collector that reads the tables at each scrape.

    Raises:
        ImportError: ``prometheus_client`` is not installed.
    """
    from prometheus_client.core import GaugeMetricFamily  # noqa: PLC0415

    class DatabaseCollector:
        def describe(self) -> list[Any]:
            return []  # read nothing at registration

        def collect(self) -> Iterator[Any]:
            up = GaugeMetricFamily("inboxguard_up", "1 when the tables could be read")
            try:
                reading = stats(engine, table_prefix=table_prefix)
            except Exception as error:
                logger.warning("serve-metrics: reading the tables failed: %s", type(error).__name__)
                up.add_metric([], 0)
                yield up
                return
            up.add_metric([], 1)
            yield up
            yield from _families(GaugeMetricFamily, reading, horizon)

    return DatabaseCollector()


def _families(family: Any, reading: Any, horizon: dt.timedelta | None) -> Iterator[Any]:
    def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Any:
        return family(f"inboxguard_{name}", doc, labels=list(labels))

    if reading.consumers is not None:
        rows = gauge("evidence_rows", "Evidence rows per consumer", ("consumer",))
        oldest = gauge(
            "evidence_oldest_age_seconds", "Age of the oldest evidence row", ("consumer",)
        )
        opened = gauge("quarantine_open", "Open quarantine records", ("consumer",))
        for c in reading.consumers:
            rows.add_metric([c.consumer], c.processed)
            opened.add_metric([c.consumer], c.quarantined)
            if c.oldest_evidence_age is not None:
                oldest.add_metric([c.consumer], c.oldest_evidence_age.total_seconds())
        yield from (rows, oldest, opened)
        if horizon is not None:
            limit = gauge("evidence_horizon_seconds", "The retention horizon (--horizon)")
            limit.add_metric([], horizon.total_seconds())
            yield limit
    if reading.outbox is not None:
        out = reading.outbox
        age = out.oldest_unsent_age.total_seconds() if out.oldest_unsent_age else 0.0
        for name, doc, value in (
            ("outbox_backlog", "Outbox rows not yet delivered", out.backlog),
            ("outbox_oldest_unsent_age_seconds", "Age of the oldest unsent row", age),
            ("outbox_dead", "Outbox rows marked dead", out.dead),
        ):
            g = gauge(name, doc)
            g.add_metric([], value)
            yield g
    if reading.effects is not None:
        fx = reading.effects
        states = gauge("effects", "Effects by ledger state", ("state",))
        for state, n in fx.by_state.items():
            states.add_metric([state], n)
        unknown = gauge("effects_oldest_unknown_age_seconds", "Age of the oldest unknown effect")
        age = fx.oldest_unknown_age.total_seconds() if fx.oldest_unknown_age else 0.0
        unknown.add_metric([], age)
        yield from (states, unknown)


def _target(args: argparse.Namespace) -> tuple[Engine, str, dt.timedelta | None]:
    """The engine, table prefix and horizon to report, from the options and
    the inbox of ``--app`` (the options win)."""
    url = database_url(args)
    if not args.app:
        if not url:
            raise UsageError(f"give --db URL (or set {DB_ENV}), or --app MODULE:ATTR")
        return (
            open_engine(args, read_only=True, connect_timeout=args.connect_timeout),
            args.prefix,
            args.horizon,
        )
    inboxes = discover(
        resolve_object(args.app, default_attrs=DEFAULT_APP_ATTRS), args.app
    ).sql_inboxes
    if not inboxes:
        raise UsageError(f"--app {args.app!r} guards nothing with an inbox kept in SQL tables")
    inbox = inboxes[0]
    if len(inboxes) > 1:
        logger.warning(
            "serve-metrics: --app %s has %d inboxes; reporting the first (prefix %s)",
            args.app,
            len(inboxes),
            inbox.table_prefix,
        )
    engine = (
        open_engine(args, read_only=True, connect_timeout=args.connect_timeout)
        if url
        else inbox.engine
    )
    given_prefix = args.prefix != DEFAULT_PREFIX
    prefix = args.prefix if given_prefix else inbox.table_prefix
    return engine, prefix, args.horizon or inbox.retention.horizon


def _serve(args: argparse.Namespace) -> int:
    try:
        from prometheus_client import CollectorRegistry, start_http_server  # noqa: PLC0415
    except ImportError:
        print(f"inboxguard: {_EXTRA}", file=sys.stderr)
        return 2
    try:
        engine, prefix, horizon = _target(args)
    except (ConfigurationError, UsageError) as error:
        print(f"inboxguard serve-metrics: {error}", file=sys.stderr)
        return 2
    registry = CollectorRegistry(auto_describe=False)
    registry.register(database_collector(engine, prefix, horizon))
    server, _ = start_http_server(args.port, addr=args.host, registry=registry)
    print(
        f"inboxguard: serving metrics on http://{args.host}:{server.server_port}/metrics",
        file=sys.stderr,
        flush=True,
    )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    engine.dispose()
    return 0
