"""``inboxguard effects``: inspect and settle the effect ledger from a shell.

    inboxguard effects list --db URL [--state unknown] [--limit N] [--after CURSOR]
    inboxguard effects show KEY --db URL
    inboxguard effects reconcile --db URL --provider pkg.module:factory [--older-than 300]
    inboxguard effects resolve KEY --db URL (--applied REFERENCE | --not-applied) --note TEXT

``list`` shows a page of effects, least recently updated first, with the
total and the ``--after`` cursor of the next page. ``--provider`` names the
provider to look effects up with: an object or a zero-argument factory, as
``module:attribute`` (resolved from the current directory). Output is text
for people, JSON with ``--json``; the exit status is 0 on success, 1 when no
such effect exists or ``reconcile`` leaves effects for an operator, 2 on bad
input, 3 when the database cannot be reached.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import enum
import shlex
from typing import Any

from sqlalchemy.engine import Engine

from inboxguard import ConfigurationError, EffectLedger, EffectState, Provider, Receipt
from inboxguard.cli._app import resolve_object
from inboxguard.cli._args import add_database, add_json, positive_int, recorded_text
from inboxguard.cli._command import fail, run_on_database
from inboxguard.cli._output import (
    EXIT_FOUND,
    EXIT_OK,
    UsageError,
    emit_json,
    fields,
    human,
    table,
)
from inboxguard.effects import EffectRecord

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``effects`` and its actions to the command line."""
    parser = subparsers.add_parser("effects", help="inspect and settle external effects")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        add_database(p, "ledger")
        add_json(p)

    listing = actions.add_parser("list", help="effects, least recently updated first")
    common(listing)
    listing.add_argument("--state", choices=[s.value for s in _states()])
    listing.add_argument("--limit", type=positive_int, default=100, metavar="N")
    listing.add_argument(
        "--after",
        metavar="CURSOR",
        help="the page after this cursor (printed at the end of the previous page)",
    )
    listing.set_defaults(func=_command(_list, read_only=True))

    show = actions.add_parser("show", help="one effect with its history")
    common(show)
    show.add_argument("key")
    show.set_defaults(func=_command(_show, read_only=True))

    rec = actions.add_parser("reconcile", help="settle unknown effects by lookup")
    common(rec)
    rec.add_argument("--provider", required=True, help="module:attribute of the provider")
    rec.add_argument("--older-than", type=float, default=300.0, help="seconds (default 300)")
    rec.add_argument("--limit", type=int, default=1000)
    rec.set_defaults(func=_command(_reconcile, read_only=False))

    res = actions.add_parser("resolve", help="record an operator's verdict on an unknown effect")
    common(res)
    res.add_argument("key")
    verdict = res.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--applied", metavar="REFERENCE", help="the provider's reference")
    verdict.add_argument("--not-applied", action="store_true")
    res.add_argument("--note", required=True, help="what was checked, for the history")
    res.set_defaults(func=_command(_resolve, read_only=False))


def _states() -> list[enum.Enum]:
    return list(EffectState)


def _command(action: Any, *, read_only: bool) -> Any:
    def run(args: argparse.Namespace) -> int:
        return run_on_database("effects", args, action, read_only=read_only)

    return run


def _ledger(engine: Engine, args: argparse.Namespace) -> EffectLedger:
    return EffectLedger(engine, table_prefix=args.prefix)


def _list(engine: Engine, args: argparse.Namespace) -> int:
    ledger = _ledger(engine, args)
    try:
        records = ledger.effects(state=args.state, limit=args.limit, after=args.after)
    except ConfigurationError as error:
        raise UsageError(str(error).replace("after=", "--after ", 1)) from None
    if args.json:  # each item's cursor is the --after of the page that follows it
        emit_json([{**_summary(r), "cursor": r.cursor} for r in records])
        return EXIT_OK
    rows = [
        (r.effect_key, r.provider, r.state, r.applied, r.attempts, r.updated_at) for r in records
    ]
    table(("EFFECT", "PROVIDER", "STATE", "APPLIED", "ATTEMPTS", "UPDATED"), rows)
    more = (
        f"; next page: --after {shlex.quote(records[-1].cursor)}"
        if len(records) == args.limit
        else ""
    )
    what = f"{args.state} effects" if args.state else "effects"
    print(f"{len(records)} shown of {ledger.count(state=args.state)} {what}{more}")
    return EXIT_OK


def _summary(record: EffectRecord) -> dict[str, Any]:
    return {
        "effect_key": record.effect_key,
        "provider": record.provider,
        "state": record.state.value,
        "applied": record.applied,
        "attempts": record.attempts,
        "receipt": record.receipt.reference if record.receipt else None,
        "updated_at": record.updated_at,
    }


def _show(engine: Engine, args: argparse.Namespace) -> int:
    record = _ledger(engine, args).get(args.key)
    if record is None:
        return fail("effects", f"no effect {args.key!r}", EXIT_FOUND)
    if args.json:
        emit_json(record)
        return EXIT_OK
    fields([(k, v) for k, v in _summary(record).items()])
    for t in record.history:
        print(f"  {human(t.at)} {t.event}: {t.from_state or '-'} -> {t.to_state} by {t.actor}")
    return EXIT_OK


def _load_provider(spec: str) -> Provider:
    target = resolve_object(spec, option="--provider")
    try:
        made = isinstance(target, type) or not hasattr(target, "contract")
        provider = target() if made else target
    except Exception as error:  # the user's factory: its failure is one line, not a traceback
        msg = f"--provider {spec!r} could not be made: {type(error).__name__}: {error}"
        raise UsageError(msg) from None
    if not isinstance(provider, Provider):
        msg = f"--provider {spec!r} gave {provider!r}, which has no contract/send/lookup"
        raise UsageError(msg)
    return provider


def _reconcile(engine: Engine, args: argparse.Namespace) -> int:
    report = _ledger(engine, args).reconcile(
        _load_provider(args.provider),
        older_than=dt.timedelta(seconds=args.older_than),
        limit=args.limit,
    )
    if args.json:
        emit_json(report)
    else:
        fields([(f.name, getattr(report, f.name)) for f in dataclasses.fields(report)])
    return EXIT_FOUND if report.needs_operator or report.failed else EXIT_OK


def _resolve(engine: Engine, args: argparse.Namespace) -> int:
    recorded_text(args, "--note")
    receipt = Receipt(args.applied) if args.applied else None
    record = _ledger(engine, args).resolve(
        args.key, applied=not args.not_applied, receipt=receipt, note=args.note
    )
    if args.json:
        emit_json(_summary(record))
    else:
        fields(list(_summary(record).items()))
    return EXIT_OK
