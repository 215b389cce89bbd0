"""Identity validation and command IDs derived from business intent."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import uuid
from decimal import Decimal

import pytest

from inboxguard import InvalidCommandError, command_id_for
from inboxguard._core.identity import validate_identity


def test_command_id_for_is_readable_and_sorted() -> None:
    """Fields are sorted by name, so argument order never changes the ID."""
    first = command_id_for("invoice.charge", invoice_id=42, cycle="2026-11")
    second = command_id_for("invoice.charge", cycle="2026-11", invoice_id=42)
    assert first == second == "invoice.charge:cycle=2026-11,invoice_id=42"


def test_command_id_for_escapes_separators() -> None:
    """Values containing separators cannot collide with other field splits."""
    a = command_id_for("k", a="1,b=2")
    b = command_id_for("k", a="1", b="2")
    assert a != b
    assert a == "k:a=1%2Cb%3D2"


def test_command_id_for_supports_identity_types() -> None:
    """UUID, Decimal, dates, aware datetimes and bools have stable forms."""
    cid = command_id_for(
        "x.y",
        u=uuid.UUID(int=1),
        d=Decimal("1.50"),  # by value: 1.5
        day=dt.date(2026, 1, 2),
        at=dt.datetime(2026, 1, 2, 3, tzinfo=dt.UTC),
        flag=True,
    )
    assert cid == (
        "x.y:at=2026-01-02T03%3A00%3A00+00%3A00,d=1.5,day=2026-01-02,flag=true,"
        "u=00000000-0000-0000-0000-000000000001"
    )


def test_command_id_for_is_stable_across_processes() -> None:
    """Another interpreter with another hash seed derives the same ID."""
    code = "import inboxguard; print(inboxguard.command_id_for('a.b', z=1, y='é', x=True))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "99", "PYTHONUTF8": "1"},
    ).stdout.strip()
    assert out == command_id_for("a.b", z=1, y="é", x=True)


def test_long_command_ids_are_hashed_deterministically() -> None:
    """An ID past 255 characters keeps its kind and hashes the fields."""
    cid = command_id_for("bulk.import", rows="r" * 400)
    assert cid.startswith("bulk.import:sha256=")
    assert len(cid) <= 255
    assert cid == command_id_for("bulk.import", rows="r" * 400)


@pytest.mark.parametrize(
    ("kind", "fields", "words"),
    [
        ("", {"a": 1}, "dotted name"),
        ("bad kind", {"a": 1}, "dotted name"),
        ("k", {}, "at least one"),
        ("k", {"a": 1.5}, "float"),
        ("k", {"a": None}, "NoneType"),
        ("k", {"a": dt.datetime(2026, 1, 1)}, "naive"),
    ],
)
def test_command_id_for_refuses_poor_identities(
    kind: str, fields: dict[str, object], words: str
) -> None:
    """Floats, None, naive datetimes and bad kinds are refused with a reason."""
    with pytest.raises(InvalidCommandError, match=words):
        command_id_for(kind, **fields)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("", "empty"),
        ("x" * 256, "256 characters"),
        (" padded", "whitespace"),
        ("padded ", "whitespace"),
        ("tab\there", "non-printable"),
        ("nul\x00", "non-printable"),
        (42, "must be a str"),
        (None, "must be a str"),
        (b"bytes", "must be a str"),
    ],
)
def test_bad_identities_raise_invalid_command(value: object, words: str) -> None:
    """Unusable IDs are a ValueError naming the field and the fix."""
    with pytest.raises(InvalidCommandError, match=words) as caught:
        validate_identity(value, "command_id")
    assert "command_id" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_unicode_and_255_characters_are_accepted() -> None:
    """Printable Unicode up to the column width is a valid identity."""
    assert validate_identity("zoë-" + "x" * 251, "command_id")
