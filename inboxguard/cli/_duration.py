"""Durations on the command line: ``30d``, ``12h``, ``90m``, ``45s``, ``1d12h``
or ISO 8601 (``P30D``, ``PT12H``, ``P1DT6H30M``)."""

from __future__ import annotations

import argparse
import datetime as dt
import re

__all__ = ["parse_duration", "parse_window"]

_SHORT = re.compile(r"(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\Z")
_ISO = re.compile(
    r"P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?\Z", re.IGNORECASE
)


def parse_duration(text: str) -> dt.timedelta:
    """Parse a duration; raise ``argparse.ArgumentTypeError`` naming the forms."""
    value = text.strip()
    short = _SHORT.match(value.lower())
    if value and short and any(short.groups()):
        weeks, days, hours, minutes, seconds = (int(g or 0) for g in short.groups())
        return dt.timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    iso = _ISO.match(value)
    if iso and any(iso.groups()) and not value.upper().endswith("T"):
        weeks, days, hours, minutes = (int(g or 0) for g in iso.groups()[:4])
        return dt.timedelta(
            weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=float(iso[5] or 0)
        )
    msg = (
        f"invalid duration {text!r}: use e.g. 30d, 12h, 90m, 45s, 1d12h,"
        " or ISO 8601 such as P30D or PT12H"
    )
    raise argparse.ArgumentTypeError(msg)


def parse_window(text: str) -> tuple[str, dt.timedelta]:
    """Parse ``NAME=DURATION`` (e.g. ``dead_letter_replay=30d``)."""
    name, sep, duration = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        msg = f"invalid window {text!r}: use NAME=DURATION, e.g. dead_letter_replay=30d"
        raise argparse.ArgumentTypeError(msg)
    return name, parse_duration(duration)
