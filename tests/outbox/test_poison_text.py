"""O20-O21: text a database refuses never takes an outbox batch down.

O20: a send that fails with an error text holding a NUL and a lone surrogate
(a transport quoting the payload it could not send) is recorded with the text
escaped, and the rest of the batch is recorded as delivered. O21: a receipt
holding such text, or too long to store, is recorded as a note; the row is
delivered.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

import inboxguard
from inboxguard._core.text import MAX_STORED_TEXT

IDS = [f"order.ship:id={n}" for n in range(4)]
#: ``Outbox.add`` accepts a NUL; the transport adds a lone surrogate (bytes it
#: decoded with ``surrogateescape``).
POISON = {"note": "card \x00 number"}


def add_all(engine: Engine, outbox: inboxguard.Outbox) -> None:
    with Session(engine) as session, session.begin():
        for cid in IDS:
            payload = POISON if cid == IDS[1] else {"cid": cid}
            outbox.add(session, command_id=cid, destination="q", payload=payload)


def test_o20_an_error_text_the_database_refuses_is_stored_escaped_and_the_batch_holds(
    engine: Engine, outbox: inboxguard.Outbox, caplog: pytest.LogCaptureFixture
) -> None:
    sent: list[str] = []

    def send(message: inboxguard.OutboxMessage) -> Any:
        if message.command_id == IDS[1]:
            raise ConnectionError(f"broker refused {message.payload['note']} \udcff here")
        sent.append(message.command_id)
        return {"seq": len(sent)}

    add_all(engine, outbox)
    with (
        caplog.at_level(logging.WARNING, "inboxguard"),
        inboxguard.Dispatcher(outbox, send, max_attempts=3) as dispatcher,
    ):
        assert dispatcher.run_once() == 3
        assert dispatcher.run_once() == 0  # nothing accepted by the broker is sent again
    assert sent == [IDS[0], IDS[2], IDS[3]]
    rows = {cid: outbox.get(cid) for cid in IDS}
    assert all(rows[cid].delivered_at is not None for cid in sent)
    poisoned = rows[IDS[1]]
    assert (poisoned.delivered_at, poisoned.dead_at, poisoned.attempts) == (None, None, 1)
    assert poisoned.last_error == "ConnectionError: broker refused card \\x00 number \\udcff here"
    assert outbox.status().backlog == 1


@pytest.mark.parametrize(
    ("receipt", "stored"),
    [
        ({"id": "m-\ud800"}, {"id": "m-\ud800"}),
        ({"blob": "x" * (MAX_STORED_TEXT + 1)}, {"receipt_too_long": MAX_STORED_TEXT + 13}),
    ],
    ids=["lone-surrogate", "too-long"],
)
def test_o21_a_receipt_the_database_refuses_still_records_the_delivery(
    engine: Engine, outbox: inboxguard.Outbox, receipt: Any, stored: Any
) -> None:
    with Session(engine) as session, session.begin():
        outbox.add(session, command_id="a", destination="q", payload={"n": 1})
    with inboxguard.Dispatcher(outbox, lambda message: receipt) as dispatcher:
        assert dispatcher.run_once() == 1
        assert dispatcher.run_once() == 0
    row = outbox.get("a")
    assert row.delivered_at is not None
    assert row.receipt == stored


def test_o22_a_payload_over_max_allowed_packet_is_refused_naming_the_limit(
    mysql_url: str, prefix: str
) -> None:
    """A 20 MB payload on MariaDB (16 MiB ``max_allowed_packet``): a clear error
    before the server closes the connection; the transaction goes on."""
    engine = create_engine(mysql_url)
    box = inboxguard.Outbox(engine, table_prefix=prefix)
    box.create_schema()
    try:
        with Session(engine) as session, session.begin():
            with pytest.raises(inboxguard.ConfigurationError, match="max_allowed_packet"):
                box.add(
                    session, command_id="big", destination="q", payload={"doc": "x" * 20_000_000}
                )
            box.add(session, command_id="small", destination="q", payload={"doc": "x"})
        assert box.get("big") is None
        assert box.get("small") is not None
    finally:
        box.drop_schema()
        engine.dispose()
