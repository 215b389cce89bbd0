"""G12: a digest stands for the payload's value, and one call has one digest."""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from inboxguard import Inbox, PayloadEncodingError, PayloadMismatchError


class Redacted(str):
    """A card number that prints masked."""

    __slots__ = ()

    def __str__(self) -> str:
        return "****"


class Plan(enum.IntEnum):
    BASIC = 1
    PRO = 2


def run(inbox: Inbox, engine: Engine, command_id: str, payload: object) -> bool:
    """Guard one delivery; return whether the block ran as fresh."""
    with Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id=command_id, payload=payload) as e:
            return not e.duplicate


def test_g12_a_changed_value_behind_the_same_text_is_a_mismatch(
    inbox: Inbox, engine: Engine
) -> None:
    """Two card numbers that print alike, or two enum members, are two payloads."""
    assert run(inbox, engine, "card", {"card": Redacted("4111111111111111")})
    with pytest.raises(PayloadMismatchError):
        run(inbox, engine, "card", {"card": Redacted("5500000000000004")})
    assert not run(inbox, engine, "card", {"card": "4111111111111111"})  # same content
    assert run(inbox, engine, "plan", {"plan": Plan.BASIC})
    with pytest.raises(PayloadMismatchError):
        run(inbox, engine, "plan", {"plan": Plan.PRO})
    assert [r.command_id for r in inbox.quarantined()] == ["card", "plan"]


def test_g12_a_reserialised_number_is_a_duplicate(inbox: Inbox, engine: Engine) -> None:
    """A JSON producer that writes 1 as 1.0, 1e16 as 10**16 or 10.50 as 10.5
    sends the same command."""
    assert run(inbox, engine, "n", {"a": 1, "b": 1e16, "c": Decimal("10.50"), "d": 0.0})
    again = {"a": 1.0, "b": 10**16, "c": 10.5, "d": -0.0}
    assert not run(inbox, engine, "n", again)
    with pytest.raises(PayloadMismatchError):
        run(inbox, engine, "n", {**again, "c": 10.51})


def test_g12_one_call_one_digest(inbox: Inbox, engine: Engine) -> None:
    """Positional, keyword and explicit-default forms of one call run once."""
    ran: list[tuple[str, int, str]] = []

    @inbox.handler(consumer="billing.charge", command_id="invoice_id")
    def charge(session: Session, invoice_id: str, amount: int, currency: str = "EUR") -> str:
        ran.append((invoice_id, amount, currency))
        return invoice_id

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("inv-9", 100), {}),
        ((), {"invoice_id": "inv-9", "amount": 100}),
        (("inv-9",), {"amount": 100, "currency": "EUR"}),
    ]
    for args, kwargs in calls:
        with Session(engine) as session, session.begin():
            assert charge(session, *args, **kwargs) == "inv-9"
    assert ran == [("inv-9", 100, "EUR")]
    with pytest.raises(PayloadMismatchError), Session(engine) as session, session.begin():
        charge(session, "inv-9", 100, currency="USD")


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_g12_bad_details_never_replace_the_refusal(inbox: Inbox, engine: Engine) -> None:
    """A mismatch with unencodable details still raises PayloadMismatchError
    and its record is written."""
    run(inbox, engine, "m", {"v": 1})
    cycle: list[Any] = []
    cycle.append(cycle)
    details: dict[Any, Any] = {"cycle": cycle, "obj": Unprintable(), "text": "\ud800"}
    details[(1, 2)] = "tuple key"
    with pytest.raises(PayloadMismatchError), Session(engine) as session, session.begin():
        with inbox.guard(session, consumer="c", command_id="m", payload={"v": 2}, details=details):
            pass
    (record,) = inbox.quarantined()
    assert record.details is not None
    assert "unencodable_details" in record.details


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


def _cycle() -> dict[str, Any]:
    node: dict[str, Any] = {"name": "a"}
    node["self"] = [node]
    return node


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"items": [{}, {"amount": 10**5000}]}, "payload['items'][1]['amount']"),
        ({"name": "caf\udce9"}, "payload['name']"),
        ({"deep": _nested(200)}, "payload['deep'][0]"),
        ({"node": _cycle()}, "payload['node']['self'][0]"),
    ],
    ids=["huge-int", "lone-surrogate", "too-deep", "cycle"],
)
def test_g12_a_bad_payload_is_refused_naming_its_path(
    inbox: Inbox, engine: Engine, payload: object, path: str
) -> None:
    """Huge ints, lone surrogates, over-deep nesting and cycles raise
    PayloadEncodingError with the path; nothing is written."""
    with pytest.raises(PayloadEncodingError) as caught:
        run(inbox, engine, "bad", payload)
    assert caught.value.path.startswith(path)
    assert inbox.lookup("c", "bad") is None
