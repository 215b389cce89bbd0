"""``inboxguard outbox status|dispatch|retry-dead|compact``.

The database comes from ``--url`` or the ``INBOXGUARD_DATABASE_URL``
environment variable. ``dispatch`` needs a transport: ``--transport
module:name`` names a transport callable, or a zero-argument factory that
returns one (so the broker connection is built in the dispatcher's process).
``dispatch`` prints how many rows were delivered, failed (due again after a
backoff), dead and released, and exits 1 when it claimed rows but delivered
none of them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import inspect
import json
import logging
import os
import sys
from typing import Any

from sqlalchemy import create_engine

from inboxguard.cli._app import resolve_object
from inboxguard.errors import ConfigurationError, InboxGuardError
from inboxguard.outbox import Dispatcher, DispatchStats, Outbox, OutboxMessage

__all__ = ["load_transport", "print_transport", "register"]

_ENV_URL = "INBOXGUARD_DATABASE_URL"


def register(subparsers: Any) -> None:
    """Add the ``outbox`` command and its subcommands."""
    parser = subparsers.add_parser("outbox", help="inspect and drain the transactional outbox")
    sub = parser.add_subparsers(dest="outbox_command", metavar="ACTION", required=True)

    status = sub.add_parser("status", help="backlog, oldest unsent age, dead rows")
    _common(status)
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(func=_status)

    dispatch = sub.add_parser("dispatch", help="deliver due rows through a transport")
    _common(dispatch)
    dispatch.add_argument(
        "--transport",
        required=True,
        help="module:name of a transport callable, or of a zero-argument factory returning one",
    )
    dispatch.add_argument("--batch-size", type=int, default=100)
    dispatch.add_argument("--max-attempts", type=int, default=10)
    dispatch.add_argument("--poll-interval", type=float, default=1.0, help="seconds")
    dispatch.add_argument("--lease", type=float, default=60.0, help="seconds")
    dispatch.add_argument(
        "--wakeup", action="store_true", help="PostgreSQL: LISTEN for commits between polls"
    )
    dispatch.add_argument(
        "--once", action="store_true", help="run one pass and exit (default: until SIGTERM)"
    )
    dispatch.set_defaults(func=_dispatch)

    retry = sub.add_parser("retry-dead", help="make dead rows due again")
    _common(retry)
    retry.add_argument(
        "--command-id", action="append", dest="command_ids", help="only this ID (repeatable)"
    )
    retry.set_defaults(func=_retry_dead)

    compact = sub.add_parser("compact", help="drop delivered payloads, purge expired evidence")
    _common(compact)
    compact.add_argument("--delivered-retention-hours", type=float, default=24.0)
    compact.add_argument("--retention-days", type=float, default=30.0)
    compact.set_defaults(func=_compact)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=os.environ.get(_ENV_URL), help=f"database URL (${_ENV_URL})"
    )
    parser.add_argument("--table-prefix", default="inboxguard_")


def _outbox(args: argparse.Namespace, **options: Any) -> Outbox:
    if not args.url:
        msg = f"no database: pass --url or set {_ENV_URL}"
        raise ConfigurationError(msg)
    return Outbox(create_engine(args.url), table_prefix=args.table_prefix, **options)


def _status(args: argparse.Namespace) -> int:
    return _guarded(lambda: _print_status(args))


def _print_status(args: argparse.Namespace) -> int:
    status = _outbox(args).status()
    if args.json:
        print(
            json.dumps(
                {
                    "backlog": status.backlog,
                    "oldest_unsent_age_seconds": status.oldest_unsent_age.total_seconds(),
                    "dead": status.dead,
                    "delivered": status.delivered,
                }
            )
        )
    else:
        print(f"backlog            {status.backlog}")
        print(f"oldest unsent age  {status.oldest_unsent_age}")
        print(f"dead               {status.dead}")
        print(f"delivered (kept)   {status.delivered}")
    return 1 if status.dead else 0


def _dispatch(args: argparse.Namespace) -> int:
    return _guarded(lambda: _run_dispatch(args))


def _run_dispatch(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    transport = load_transport(args.transport)
    dispatcher = Dispatcher(
        _outbox(args),
        transport,
        batch_size=args.batch_size,
        max_attempts=args.max_attempts,
        poll_interval=dt.timedelta(seconds=args.poll_interval),
        lease=dt.timedelta(seconds=args.lease),
        wakeup=args.wakeup,
    )
    if args.once:
        with dispatcher:
            dispatcher.run_once()
        return _report("dispatched", dispatcher.stats)
    return _report("stopped", dispatcher.run_forever())


def _report(what: str, stats: DispatchStats) -> int:
    """Print the counters; 1 when rows were claimed and none was delivered."""
    print(
        f"{what}: delivered {stats.delivered}, failed {stats.failed}, dead {stats.dead},"
        f" released {stats.released}"
    )
    claimed = stats.delivered + stats.failed + stats.dead + stats.released
    return 1 if claimed and not stats.delivered else 0


def _retry_dead(args: argparse.Namespace) -> int:
    def run() -> int:
        print(f"made due again: {_outbox(args).retry_dead(args.command_ids)}")
        return 0

    return _guarded(run)


def _compact(args: argparse.Namespace) -> int:
    def run() -> int:
        box = _outbox(
            args,
            retention=dt.timedelta(days=args.retention_days),
            delivered_retention=dt.timedelta(hours=args.delivered_retention_hours),
        )
        result = box.compact()
        print(f"compacted {result.compacted}, purged {result.purged}")
        return 0

    return _guarded(run)


def load_transport(spec: str) -> Any:
    """Import ``module:name``; call it when it is a factory (takes no message).

    Raises:
        ConfigurationError: the spec does not name a callable.
    """
    target = resolve_object(spec, option="--transport")
    if not callable(target):
        msg = f"--transport {spec!r} is not callable"
        raise ConfigurationError(msg)
    if _required_args(target) == 0:
        return target()  # a factory: build the transport in this process
    return target


def _required_args(fn: Any) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in params if p.kind in kinds and p.default is inspect.Parameter.empty)


def _guarded(run: Any) -> int:
    try:
        status: int = run()
    except InboxGuardError as exc:
        print(f"inboxguard outbox: {exc}", file=sys.stderr)
        return 2
    return status


def print_transport(message: OutboxMessage) -> None:
    """A transport that prints each message as a JSON line (nothing is sent)."""
    print(
        json.dumps(
            {
                "command_id": message.command_id,
                "destination": message.destination,
                "digest": message.digest,
                "payload": message.payload,
            },
            sort_keys=True,
        )
    )
