"""``inboxguard dashboard``: the operator screen in a browser.

    inboxguard dashboard --db URL --port 8080 [--host 127.0.0.1] [--token T]

Read-only unless a token is given (``--token`` or, better, since a command
line is visible to other users of the machine, ``INBOXGUARD_DASHBOARD_TOKEN``);
with one, quarantine records can be released or resolved from the page,
each action confirmed and recorded with who and why. Needs the ``dashboard``
extra; the database URL is never printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from typing import Any

from inboxguard.cli._args import add_database
from inboxguard.cli._db import open_engine
from inboxguard.cli._duration import parse_duration
from inboxguard.cli._output import UsageError
from inboxguard.cli.serve_metrics import port_number
from inboxguard.errors import ConfigurationError

__all__ = ["register"]

TOKEN_ENV = "INBOXGUARD_DASHBOARD_TOKEN"  # noqa: S105 - the variable's name, not a token
_EXTRA = "dashboard needs the 'dashboard' extra: pip install 'inboxguard[dashboard]'"


def register(subparsers: Any) -> None:
    """Add ``dashboard`` to the command line."""
    parser = subparsers.add_parser("dashboard", help="serve the operator screen")
    add_database(parser, "inbox")
    parser.add_argument("--port", type=port_number, required=True, help="TCP port")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name the screen is reached by, besides localhost, 127.0.0.1 and ::1"
        " (repeatable); requests naming any other host get 400",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV) or None,
        help=f"enables release/resolve (default: ${TOKEN_ENV}; without one, read-only)",
    )
    parser.add_argument(
        "--sample-every",
        type=parse_duration,
        default=dt.timedelta(seconds=15),
        help="how often the outbox chart is sampled (default 15s)",
    )
    parser.add_argument(
        "--horizon", type=parse_duration, help="the inbox's retention horizon, e.g. 30d"
    )
    parser.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: PLC0415

        from inboxguard.dashboard import dashboard_app  # noqa: PLC0415

        import_check()
    except ImportError:
        print(f"inboxguard: {_EXTRA}", file=sys.stderr)
        return 2
    try:
        engine = open_engine(args, read_only=True, connect_timeout=30)
    except UsageError as error:
        print(f"inboxguard dashboard: {error}", file=sys.stderr)
        return 2
    try:
        app = dashboard_app(
            engine,
            token=args.token,
            table_prefix=args.prefix,
            sample_every=args.sample_every,
            horizon=args.horizon,
            allowed_hosts=[*args.allowed_host, *_bound_name(args.host)],
        )
    except ConfigurationError as error:
        print(f"inboxguard: {error}", file=sys.stderr)
        return 2
    mode = "actions enabled" if args.token else "read-only"
    print(
        f"inboxguard: dashboard on http://{args.host}:{args.port}/ ({mode})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", server_header=False)
    engine.dispose()
    return 0


def _bound_name(host: str) -> list[str]:
    """The address bound, as an allowed host, unless it is a wildcard."""
    return [] if host in ("0.0.0.0", "::", "") else [host]  # noqa: S104 - compared, not bound


def import_check() -> None:
    """Import the dashboard's packages now, so a missing one is named at start."""
    import jinja2  # noqa: F401, PLC0415
    import python_multipart  # noqa: F401, PLC0415
    import starlette  # noqa: F401, PLC0415
