"""G28: one value, one command ID and one digest form.

``command_id_for`` writes numbers by value, as the digest does, and text in
NFC; a lone surrogate is an ``InvalidCommandError`` and a long kind is
hashed like long fields. The digest has one form only: a stored text ``"1"``
and a redelivered number ``Decimal("1")`` are a mismatch, quarantined, never
a duplicate. Text is digested by code points: an NFC and an NFD spelling of
one word are a mismatch too (fail closed), while ``command_id_for`` gives
them one ID, so the two never run as two commands.
"""

from __future__ import annotations

import unicodedata
from decimal import Decimal

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import (
    Inbox,
    InvalidCommandError,
    PayloadMismatchError,
    command_id_for,
    digest_of,
)


def test_equal_decimals_and_ints_give_one_id() -> None:
    ids = {
        command_id_for("invoice.charge", amount=v)
        for v in (10, Decimal("10.0"), Decimal("10.00"), Decimal("1E+1"))
    }
    assert ids == {"invoice.charge:amount=10"}
    assert (
        command_id_for("k", a=Decimal("0.50")) == command_id_for("k", a=Decimal("0.5")) == "k:a=0.5"
    )
    assert command_id_for("k", a=Decimal("-0")) == command_id_for("k", a=0)
    assert command_id_for("k", a=Decimal("10.5")) != command_id_for("k", a=Decimal("10.05"))


def test_a_lone_surrogate_is_an_invalid_command() -> None:
    with pytest.raises(InvalidCommandError, match="lone surrogate"):
        command_id_for("k", name="x\ud800")


def test_a_long_kind_is_hashed_and_stays_deterministic() -> None:
    kind = "import." + "a" * 300
    first = command_id_for(kind, row=1)
    assert len(first) <= 255
    assert ":sha256=" in first
    assert first == command_id_for(kind, row=1)
    assert first != command_id_for(kind, row=2)
    assert first != command_id_for(kind + "b", row=1)  # the hash covers the whole kind


def test_nfc_and_nfd_text_give_one_id() -> None:
    composed = "Zo\u00eb"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert command_id_for("k", name=composed) == command_id_for("k", name=decomposed)


def test_a_stored_text_and_a_redelivered_number_are_a_mismatch(
    inbox: Inbox, engine: Engine
) -> None:
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="a", payload={"amount": "1"}) as e:
            assert not e.duplicate
    with pytest.raises(PayloadMismatchError), Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="a", payload={"amount": Decimal("1")}):
            raise AssertionError("a mismatch must not run")
    (record,) = inbox.quarantined()
    assert (record.command_id, record.reason) == ("a", "payload_mismatch")
    with Session(engine) as session, session.begin():  # the same text is still a duplicate
        with inbox.guard(session, consumer="c", command_id="a", payload={"amount": "1"}) as e:
            assert e.duplicate


def test_nfc_and_nfd_payloads_are_a_mismatch(inbox: Inbox, engine: Engine) -> None:
    composed = {"name": "Zo\u00eb"}
    decomposed = {"name": unicodedata.normalize("NFD", composed["name"])}
    assert digest_of(composed) != digest_of(decomposed)
    cid = command_id_for("greet", name=composed["name"])
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id=cid, payload=composed):
            pass
    with pytest.raises(PayloadMismatchError), Session(engine) as session, session.begin():
        cid_again = command_id_for("greet", name=decomposed["name"])
        with inbox.guard(session, consumer="c", command_id=cid_again, payload=decomposed):
            raise AssertionError("a mismatch must not run")
    assert [r.command_id for r in inbox.quarantined()] == [cid]
