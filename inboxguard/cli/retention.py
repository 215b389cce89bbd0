"""``inboxguard retention explain|check``: show a policy's windows and horizon,
and check replay windows against it (exit status 1 when one does not fit).

With ``--app`` the windows are the ones the application's Celery or Dramatiq
workers discover at start-up (see :mod:`inboxguard.cli._windows`), each
with where it was read, checked against the horizon of its handler's inbox.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from inboxguard._core.retention import DEFAULT_MARGIN, RetentionPolicy, Window, format_duration
from inboxguard.cli._app import resolve_object
from inboxguard.cli._args import add_json
from inboxguard.cli._duration import parse_duration, parse_window
from inboxguard.cli._output import emit_json, table
from inboxguard.cli._windows import DEFAULT_APP_ATTRS, Discovery, discover
from inboxguard.errors import ConfigurationError, RetentionMisalignedError
from inboxguard.inbox import is_sql_store

__all__ = ["load_policy", "register"]


def register(subparsers: Any) -> None:
    """Add ``retention explain`` and ``retention check``."""
    parser = subparsers.add_parser("retention", help="explain and check the retention policy")
    sub = parser.add_subparsers(dest="retention_command", metavar="ACTION", required=True)
    explain = sub.add_parser(
        "explain",
        help="print each window, its source and the horizon",
        description="Print the policy's windows and horizon. With --app, also every replay"
        " window the Celery or Dramatiq workers of that application discover (visibility"
        " timeout, retry schedule, dead-letter TTL, heartbeat requeue), where each was read"
        " and whether it fits inside the horizon (exit 1 when one does not).",
    )
    add_policy_arguments(explain)
    add_app(explain)
    add_json(explain)
    explain.add_argument(
        "--window",
        action="append",
        type=parse_window,
        default=[],
        metavar="NAME=DURATION",
        help="a replay window found elsewhere, listed with source 'command line'",
    )
    explain.set_defaults(func=_explain)
    check = sub.add_parser("check", help="exit 1 unless every window fits inside the horizon")
    add_policy_arguments(check)
    add_app(check)
    add_json(check)
    check.add_argument(
        "--window",
        action="append",
        type=parse_window,
        default=[],
        metavar="NAME=DURATION",
        help="a replay window to check, e.g. visibility_timeout=1h (repeat for more)",
    )
    check.set_defaults(func=_check)


def add_app(parser: argparse.ArgumentParser) -> None:
    """``--app MODULE:ATTR``: a Celery app, a Dramatiq broker or an Inbox."""
    parser.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        help="your Celery app, Dramatiq broker or Inbox, resolved from the current directory"
        " like celery -A (e.g. proj.worker:app, or proj.worker:build() for a factory);"
        " its workers' windows are discovered",
    )


def add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    """``--policy MODULE:ATTR`` or ``--declare NAME=DURATION`` (+ margin, result TTL)."""
    parser.add_argument(
        "--policy",
        metavar="MODULE:ATTR",
        help="import a RetentionPolicy (or an Inbox) from your code, e.g. myapp.inbox:policy",
    )
    parser.add_argument(
        "--declare",
        action="append",
        type=parse_window,
        default=[],
        metavar="NAME=DURATION",
        help="a declared window of the policy, e.g. dead_letter_replay=30d (repeat for more)",
    )
    parser.add_argument(
        "--margin",
        type=parse_duration,
        default=DEFAULT_MARGIN,
        help=f"safety margin with --declare (default {format_duration(DEFAULT_MARGIN)})",
    )
    parser.add_argument("--result-ttl", type=parse_duration, default=None, help="with --declare")


def load_policy(args: argparse.Namespace) -> RetentionPolicy:
    """Build the policy from ``--declare`` or import it from ``--policy``."""
    if args.policy and args.declare:
        msg = "give either --policy MODULE:ATTR or --declare NAME=DURATION, not both"
        raise ConfigurationError(msg)
    if args.policy:
        return _import_policy(args.policy)
    if not args.declare:
        msg = "no policy: give --policy MODULE:ATTR or at least one --declare NAME=DURATION"
        raise ConfigurationError(msg)
    windows: dict[str, dt.timedelta] = dict(args.declare)
    return RetentionPolicy(margin=args.margin, result_ttl=args.result_ttl, **windows)


def _import_policy(spec: str) -> RetentionPolicy:
    value: Any = resolve_object(spec, option="--policy")
    value = getattr(value, "retention", value)  # an Inbox carries its policy
    if not isinstance(value, RetentionPolicy):
        msg = f"--policy {spec!r} is a {type(value).__name__}, not a RetentionPolicy or an Inbox"
        raise ConfigurationError(msg)
    return value


def print_rows(policy: RetentionPolicy) -> None:
    """Print :meth:`RetentionPolicy.explain` as an aligned table."""
    rows = [("WINDOW", "LENGTH", "SOURCE")]
    rows += [(r.window, format_duration(r.length), r.source) for r in policy.explain()]
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for window, length, source in rows:
        print(f"{window:<{widths[0]}}  {length:>{widths[1]}}  {source}")


def _explain(args: argparse.Namespace) -> int:
    if args.app:
        return _explain_app(args, "explain")
    try:
        policy = load_policy(args)
        if args.window:
            policy.check("command line", **dict(args.window))
    except RetentionMisalignedError as error:
        _rows_out(policy, args)
        print(f"\nmisaligned: {error}", file=sys.stderr)
        return 1
    except ConfigurationError as error:
        print(f"inboxguard retention explain: {error}", file=sys.stderr)
        return 2
    _rows_out(policy, args)
    return 0


def _rows_out(policy: RetentionPolicy, args: argparse.Namespace) -> None:
    if args.json:
        emit_json(
            [{"window": r.window, "length": r.length, "source": r.source} for r in policy.explain()]
        )
    else:
        print_rows(policy)


def _check(args: argparse.Namespace) -> int:
    if args.app:
        return _explain_app(args, "check")
    if not args.window:
        print("inboxguard retention check: give --app or at least one --window", file=sys.stderr)
        return 2
    try:
        policy = load_policy(args)
        policy.check("command line", **dict(args.window))
    except RetentionMisalignedError as error:
        if args.json:
            emit_json({"aligned": False, "error": str(error), "horizon": error.horizon})
        print(f"misaligned: {error}", file=sys.stderr)
        return 1
    except ConfigurationError as error:
        print(f"inboxguard retention check: {error}", file=sys.stderr)
        return 2
    if args.json:
        emit_json({"aligned": True, "horizon": policy.horizon, "windows": dict(args.window)})
        return 0
    names = ", ".join(f"{name}={format_duration(length)}" for name, length in args.window)
    print(f"aligned: {names} fit inside the horizon {format_duration(policy.horizon)}")
    return 0


def _explain_app(args: argparse.Namespace, action: str) -> int:
    if args.policy or args.declare:
        msg = "--app takes the policy from the application's inbox; drop --policy/--declare"
        print(f"inboxguard retention {action}: {msg}", file=sys.stderr)
        return 2
    try:
        found = discover(resolve_object(args.app, default_attrs=DEFAULT_APP_ATTRS), args.app)
        groups = app_windows(found, [(n, w, "command line") for n, w in args.window])
    except ConfigurationError as error:
        print(f"inboxguard retention {action}: {error}", file=sys.stderr)
        return 2
    if args.json:
        emit_json(groups)
    else:
        _print_groups(groups, found.framework, action)
    misfits = [w for g in groups for w in g["discovered"] if not w["fits"]]
    return 1 if misfits else 0


def app_windows(
    found: Discovery, extra: list[tuple[str, dt.timedelta, str]]
) -> list[dict[str, Any]]:
    """Per guarded handler: its inbox's declared rows and horizon, and each
    discovered window with its source and whether it fits."""
    groups = []
    for item in found.found:
        policy = item.inbox.retention
        horizon = policy.horizon
        windows = [*item.windows, *(Window(n, w, src) for n, w, src in extra)]
        groups.append(
            {
                "handler": item.handler,
                "framework": found.framework,
                "table_prefix": item.inbox.table_prefix if is_sql_store(item.inbox) else None,
                "horizon": horizon,
                "declared": [
                    {"window": r.window, "length": r.length, "source": r.source}
                    for r in policy.explain()
                ],
                "discovered": [
                    {
                        "window": w.name,
                        "length": w.bound,
                        "source": w.source,
                        "fits": w.bound <= horizon,
                    }
                    for w in windows
                ],
            }
        )
    return groups


def _print_groups(groups: list[dict[str, Any]], framework: str, action: str) -> None:
    if not groups:
        print(f"no guarded handler found in the {framework} application")
    for i, group in enumerate(groups):
        if i:
            print()
        horizon = format_duration(group["horizon"])
        print(f"{group['handler']} (prefix {group['table_prefix']}): horizon {horizon}")
        if action == "explain":
            rows = [(r["window"], r["length"], r["source"], "declared") for r in group["declared"]]
        else:
            rows = []
        for w in group["discovered"]:
            rows.append(
                (w["window"], w["length"], w["source"], "fits" if w["fits"] else "TOO LONG")
            )
        table(("WINDOW", "LENGTH", "SOURCE", "STATUS"), rows)
