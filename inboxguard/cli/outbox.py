"""``inboxguard outbox status|dispatch|retry-dead|compact``.

The database comes from ``--db`` or ``$INBOXGUARD_DB_URL`` (the older
``--url`` and ``$INBOXGUARD_DATABASE_URL`` still work, with a deprecation
note; ``--table-prefix`` is
``--prefix``). ``--json`` prints JSON. ``dispatch`` needs a transport: ``--transport
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
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard.cli._app import resolve_object
from inboxguard.cli._args import add_database, add_json
from inboxguard.cli._command import run_on_database
from inboxguard.cli._output import EXIT_FOUND, EXIT_OK, emit_json, fields, plain
from inboxguard.errors import ConfigurationError
from inboxguard.outbox import Dispatcher, DispatchStats, Outbox, OutboxMessage

__all__ = ["load_transport", "print_transport", "register"]


def register(subparsers: Any) -> None:
    """Add the ``outbox`` command and its subcommands."""
    parser = subparsers.add_parser("outbox", help="inspect and drain the transactional outbox")
    sub = parser.add_subparsers(dest="outbox_command", metavar="ACTION", required=True)

    status = sub.add_parser("status", help="backlog, oldest unsent age, dead rows (exit 1 if dead)")
    _common(status)
    status.set_defaults(func=_command(_status, read_only=True))

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
    dispatch.set_defaults(func=_command(_run_dispatch, read_only=False))

    retry = sub.add_parser("retry-dead", help="make dead rows due again")
    _common(retry)
    retry.add_argument(
        "--command-id", action="append", dest="command_ids", help="only this ID (repeatable)"
    )
    retry.set_defaults(func=_command(_retry_dead, read_only=False))

    compact = sub.add_parser("compact", help="drop delivered payloads, purge expired evidence")
    _common(compact)
    compact.add_argument("--delivered-retention-hours", type=float, default=24.0)
    compact.add_argument("--retention-days", type=float, default=30.0)
    compact.set_defaults(func=_command(_compact, read_only=False))


def _common(parser: argparse.ArgumentParser) -> None:
    add_database(parser, "outbox")
    parser.add_argument("--table-prefix", dest="prefix", help=argparse.SUPPRESS)
    add_json(parser)


def _command(action: Any, *, read_only: bool) -> Any:
    def run(args: argparse.Namespace) -> int:
        return run_on_database("outbox", args, action, read_only=read_only)

    return run


def _outbox(engine: Engine, args: argparse.Namespace, **options: Any) -> Outbox:
    return Outbox(engine, table_prefix=args.prefix, **options)


def _status(engine: Engine, args: argparse.Namespace) -> int:
    status = _outbox(engine, args).status()
    if args.json:
        emit_json(
            {
                "backlog": status.backlog,
                "oldest_unsent_age_seconds": status.oldest_unsent_age.total_seconds(),
                "dead": status.dead,
                "delivered": status.delivered,
            }
        )
    else:
        fields(
            [
                ("backlog", status.backlog),
                ("oldest unsent age", status.oldest_unsent_age),
                ("dead", status.dead),
                ("delivered (kept)", status.delivered),
            ]
        )
    return EXIT_FOUND if status.dead else EXIT_OK


def _run_dispatch(engine: Engine, args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    transport = load_transport(args.transport)
    dispatcher = Dispatcher(
        _outbox(engine, args),
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
        return _report("dispatched", dispatcher.stats, args.json)
    return _report("stopped", dispatcher.run_forever(), args.json)


def _report(what: str, stats: DispatchStats, as_json: bool) -> int:
    """Print the counters; 1 when rows were claimed and none was delivered."""
    if as_json:
        emit_json({"what": what, **plain(stats)})
    else:
        print(
            f"{what}: delivered {stats.delivered}, failed {stats.failed}, dead {stats.dead},"
            f" released {stats.released}"
        )
    claimed = stats.delivered + stats.failed + stats.dead + stats.released
    return EXIT_FOUND if claimed and not stats.delivered else EXIT_OK


def _retry_dead(engine: Engine, args: argparse.Namespace) -> int:
    count = _outbox(engine, args).retry_dead(args.command_ids)
    if args.json:
        emit_json({"made_due_again": count})
    else:
        print(f"made due again: {count}")
    return EXIT_OK


def _compact(engine: Engine, args: argparse.Namespace) -> int:
    box = _outbox(
        engine,
        args,
        retention=dt.timedelta(days=args.retention_days),
        delivered_retention=dt.timedelta(hours=args.delivered_retention_hours),
    )
    result = box.compact()
    if args.json:
        emit_json(result)
    else:
        print(f"compacted {result.compacted}, purged {result.purged}")
    return EXIT_OK


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
