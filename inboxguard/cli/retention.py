"""``inboxguard retention explain|check``: show a policy's windows and horizon,
and check replay windows against it (exit status 1 when one does not fit)."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import sys
from typing import Any

from inboxguard._core.retention import DEFAULT_MARGIN, RetentionPolicy, format_duration
from inboxguard.cli._duration import parse_duration, parse_window
from inboxguard.errors import ConfigurationError, RetentionMisalignedError

__all__ = ["load_policy", "register"]


def register(subparsers: Any) -> None:
    """Add ``retention explain`` and ``retention check``."""
    parser = subparsers.add_parser("retention", help="explain and check the retention policy")
    sub = parser.add_subparsers(dest="retention_command", metavar="ACTION", required=True)
    explain = sub.add_parser("explain", help="print each window, its source and the horizon")
    add_policy_arguments(explain)
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
    check.add_argument(
        "--window",
        action="append",
        type=parse_window,
        required=True,
        metavar="NAME=DURATION",
        help="a replay window to check, e.g. visibility_timeout=1h (repeat for more)",
    )
    check.set_defaults(func=_check)


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
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        msg = f"--policy {spec!r} must look like MODULE:ATTR, e.g. myapp.inbox:policy"
        raise ConfigurationError(msg)
    try:
        value: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            value = getattr(value, part)
    except (ImportError, AttributeError) as error:
        msg = f"--policy {spec!r} could not be loaded: {error}"
        raise ConfigurationError(msg) from error
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
    try:
        policy = load_policy(args)
        if args.window:
            policy.check("command line", **dict(args.window))
    except RetentionMisalignedError as error:
        print_rows(policy)
        print(f"\nmisaligned: {error}", file=sys.stderr)
        return 1
    except ConfigurationError as error:
        print(f"inboxguard retention explain: {error}", file=sys.stderr)
        return 2
    print_rows(policy)
    return 0


def _check(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args)
        policy.check("command line", **dict(args.window))
    except RetentionMisalignedError as error:
        print(f"misaligned: {error}", file=sys.stderr)
        return 1
    except ConfigurationError as error:
        print(f"inboxguard retention check: {error}", file=sys.stderr)
        return 2
    names = ", ".join(f"{name}={format_duration(length)}" for name, length in args.window)
    print(f"aligned: {names} fit inside the horizon {format_duration(policy.horizon)}")
    return 0
