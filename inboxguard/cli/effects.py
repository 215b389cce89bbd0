"""``inboxguard effects``: inspect and settle the effect ledger from a shell.

    inboxguard effects list --db URL [--state unknown]
    inboxguard effects show KEY --db URL
    inboxguard effects reconcile --db URL --provider pkg.module:factory [--older-than 300]
    inboxguard effects resolve KEY --db URL (--applied REFERENCE | --not-applied) --note TEXT

``--provider`` names the provider to look effects up with: an object or a
zero-argument factory, as ``module:attribute``. Output is JSON; the exit status
is 0 on success, 1 when ``reconcile`` leaves effects for an operator, 2 on
bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import enum
import json
import sys
from typing import Any

from sqlalchemy import create_engine

from inboxguard import (
    EffectLedger,
    EffectRecord,
    EffectState,
    InboxGuardError,
    Provider,
    Receipt,
)
from inboxguard.cli._app import resolve_object
from inboxguard.cli._args import add_database

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``effects`` and its actions to the command line."""
    parser = subparsers.add_parser("effects", help="inspect and settle external effects")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        add_database(p, "ledger")

    listing = actions.add_parser("list", help="effects, least recently updated first")
    common(listing)
    listing.add_argument("--state", choices=[s.value for s in _states()])
    listing.add_argument("--limit", type=int, default=100)
    listing.set_defaults(func=_list)

    show = actions.add_parser("show", help="one effect with its history")
    common(show)
    show.add_argument("key")
    show.set_defaults(func=_show)

    rec = actions.add_parser("reconcile", help="settle unknown effects by lookup")
    common(rec)
    rec.add_argument("--provider", required=True, help="module:attribute of the provider")
    rec.add_argument("--older-than", type=float, default=300.0, help="seconds (default 300)")
    rec.add_argument("--limit", type=int, default=1000)
    rec.set_defaults(func=_reconcile)

    res = actions.add_parser("resolve", help="record an operator's verdict on an unknown effect")
    common(res)
    res.add_argument("key")
    verdict = res.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--applied", metavar="REFERENCE", help="the provider's reference")
    verdict.add_argument("--not-applied", action="store_true")
    res.add_argument("--note", required=True, help="what was checked, for the history")
    res.set_defaults(func=_resolve)


def _states() -> list[enum.Enum]:
    return list(EffectState)


def _ledger(args: argparse.Namespace) -> EffectLedger:
    if not args.db:
        msg = "--db is required (or set INBOXGUARD_DB_URL): the ledger's SQLAlchemy URL"
        raise _UsageError(msg)
    return EffectLedger(create_engine(args.db), table_prefix=args.prefix)


class _UsageError(Exception):
    pass


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _emit(value: Any) -> None:
    print(json.dumps(_plain(value), indent=2, sort_keys=True, default=str))


def _guarded(run: Any) -> Any:
    def wrapper(args: argparse.Namespace) -> int:
        try:
            status: int = run(args)
        except (_UsageError, InboxGuardError) as error:
            print(f"inboxguard effects: {error}", file=sys.stderr)
            return 2
        return status

    return wrapper


@_guarded
def _list(args: argparse.Namespace) -> int:
    records = _ledger(args).effects(state=args.state, limit=args.limit)
    _emit([_summary(r) for r in records])
    return 0


def _summary(record: EffectRecord) -> dict[str, Any]:
    return {
        "effect_key": record.effect_key,
        "provider": record.provider,
        "state": record.state.value,
        "applied": record.applied,
        "attempts": record.attempts,
        "receipt": record.receipt.reference if record.receipt else None,
        "updated_at": record.updated_at.isoformat(),
    }


@_guarded
def _show(args: argparse.Namespace) -> int:
    record = _ledger(args).get(args.key)
    if record is None:
        print(f"inboxguard effects: no effect {args.key!r}", file=sys.stderr)
        return 1
    _emit(record)
    return 0


def _load_provider(spec: str) -> Provider:
    target = resolve_object(spec, option="--provider")
    provider = target() if isinstance(target, type) or not hasattr(target, "contract") else target
    if not isinstance(provider, Provider):
        msg = f"--provider {spec!r} gave {provider!r}, which has no contract/send/lookup"
        raise _UsageError(msg)
    return provider


@_guarded
def _reconcile(args: argparse.Namespace) -> int:
    report = _ledger(args).reconcile(
        _load_provider(args.provider),
        older_than=dt.timedelta(seconds=args.older_than),
        limit=args.limit,
    )
    _emit(report)
    return 1 if report.needs_operator or report.failed else 0


@_guarded
def _resolve(args: argparse.Namespace) -> int:
    receipt = Receipt(args.applied) if args.applied else None
    record = _ledger(args).resolve(
        args.key, applied=not args.not_applied, receipt=receipt, note=args.note
    )
    _emit(_summary(record))
    return 0
