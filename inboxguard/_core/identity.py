"""Validation of identities, and command IDs derived from business intent."""

from __future__ import annotations

import datetime as dt
import enum
import hashlib
import re
import unicodedata
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import quote

from inboxguard._core.canonical import canonical_number
from inboxguard.errors import InvalidCommandError

__all__ = ["MAX_ID_LENGTH", "as_id", "command_id_for", "named_commands", "validate_identity"]

#: Longest command ID or consumer name, in characters (the column width).
MAX_ID_LENGTH = 255

_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*\Z")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Characters kept verbatim in a field value; the rest are percent-encoded.
_SAFE = "-_.~@+!$'()*"
#: What a hashed ID holds after its kind: ``":sha256="`` and 64 hex digits.
_HASHED_TAIL = len(":sha256=") + 64


def validate_identity(value: object, field: str) -> str:
    """Return ``value`` if it is a usable command ID or consumer name.

    Raises:
        InvalidCommandError: it is not a str, is empty, longer than 255
            characters, has leading or trailing whitespace, or contains a
            control or other non-printable character.
    """
    if type(value) is not str:
        msg = (
            f"{field} must be a str, got {type(value).__name__} {value!r};"
            " derive it from the business intent, e.g. with command_id_for()"
        )
        raise InvalidCommandError(msg)
    if not value or len(value) > MAX_ID_LENGTH or not value.isprintable() or value != value.strip():
        raise InvalidCommandError(_explain(value, field))
    return value


def as_id(value: Any) -> Any:
    """An int command ID as its decimal string (its value, whatever an int
    subclass prints); anything else unchanged (and left for
    :func:`validate_identity` to judge)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__repr__(int.__int__(value))
    return value


def _explain(value: str, field: str) -> str:
    if not value:
        reason = "is empty; a missing ID never means 'skip deduplication'"
    elif len(value) > MAX_ID_LENGTH:
        reason = f"is {len(value)} characters long; the limit is {MAX_ID_LENGTH}"
    elif value != value.strip():
        reason = "has leading or trailing whitespace"
    else:
        reason = "contains a control or non-printable character"
    return f"{field} {value!r} {reason}; pass a stable business ID such as 'invoice-42'"


def command_id_for(kind: str, /, **fields: object) -> str:
    """Return a deterministic, readable command ID for a business intent.

    ``command_id_for("invoice.charge", invoice_id=42, cycle="2026-11")`` is
    ``"invoice.charge:cycle=2026-11,invoice_id=42"`` in every process and Python
    version: fields are sorted by name and their values percent-encoded. An ID
    that would exceed 255 characters keeps its kind (its first characters,
    for a very long kind) and replaces the rest by the SHA-256 of the whole,
    so it stays deterministic.

    Field values may be str, int, bool, UUID, Decimal, date, timezone-aware
    datetime or Enum (by value). One value gives one ID: a number is written
    by its value as the digest writes it (``10``, ``Decimal("10.0")`` and
    ``Decimal("10.00")`` are ``10``), and text is put in Unicode normal form
    NFC (a composed and a decomposed ``é`` are one ID). Floats are refused:
    rounding makes them poor identities.

    Raises:
        InvalidCommandError: a bad kind, field name or value.
    """
    if type(kind) is not str or not _KIND.match(kind):
        msg = f"kind {kind!r} must be a dotted name such as 'invoice.charge'"
        raise InvalidCommandError(msg)
    if not fields:
        msg = f"command_id_for({kind!r}) needs at least one identifying field"
        raise InvalidCommandError(msg)
    parts = []
    for name in sorted(fields):
        if not _FIELD.match(name):
            msg = f"field name {name!r} must be a Python identifier"
            raise InvalidCommandError(msg)
        parts.append(f"{name}={quote(_field_text(name, fields[name]), safe=_SAFE)}")
    command_id = f"{kind}:{','.join(parts)}"
    if len(command_id) > MAX_ID_LENGTH:
        digest = hashlib.sha256(command_id.encode()).hexdigest()
        command_id = f"{kind[: MAX_ID_LENGTH - _HASHED_TAIL]}:sha256={digest}"
    return validate_identity(command_id, "command_id")


def _field_text(name: str, value: object) -> str:  # noqa: PLR0911
    if isinstance(value, enum.Enum):
        return _field_text(name, value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    # Subclasses are read through the base type: their content, not __str__.
    if isinstance(value, str):
        return _text(name, str.__str__(value))
    if isinstance(value, int):
        return int.__repr__(int.__int__(value))
    if isinstance(value, Decimal) and value.is_finite():
        text = canonical_number(value)
        if text is None:
            msg = f"field {name}={value!r} has too many digits written out; pass it as a str"
            raise InvalidCommandError(msg)
        return text
    if isinstance(value, uuid.UUID):
        return uuid.UUID.__str__(value)
    if isinstance(value, dt.datetime):
        if value.utcoffset() is None:
            msg = f"field {name}={value!r} is a naive datetime; attach a timezone"
            raise InvalidCommandError(msg)
        return dt.datetime.isoformat(dt.datetime.astimezone(value, dt.UTC))
    if isinstance(value, dt.date):
        return dt.date.isoformat(value)
    msg = (
        f"field {name}={value!r} ({type(value).__name__}) cannot identify a command;"
        " use str, int, UUID, Decimal, date, aware datetime or Enum"
    )
    raise InvalidCommandError(msg)


def _text(name: str, value: str) -> str:
    """A text field in NFC; a lone surrogate (no UTF-8 form) is refused."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        msg = (
            f"field {name} contains {value[error.start : error.end]!r} at index"
            f" {error.start}, a lone surrogate with no UTF-8 form; decode the producer's"
            " bytes correctly"
        )
        raise InvalidCommandError(msg) from None
    return unicodedata.normalize("NFC", value)


def named_commands(command_ids: Sequence[str]) -> str:
    """How an error names the commands it concerns: ``command 'a'`` for one,
    ``commands 'a', 'b', 'c' and 2 more`` for a batch's."""
    if not command_ids:
        return "an empty batch"
    if len(command_ids) == 1:
        return f"command {command_ids[0]!r}"
    shown = ", ".join(repr(c) for c in command_ids[:3])
    more = f" and {len(command_ids) - 3} more" if len(command_ids) > 3 else ""
    return f"commands {shown}{more}"
