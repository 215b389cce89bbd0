"""The FastStream reference worker, a real process on RabbitMQ, Redis Streams and
NATS JetStream, with PostgreSQL through asyncpg.

A "barrier" command published last and seen applied proves that everything
published before it was consumed. Each test runs on the three brokers; to keep
the suite short, one worker session checks several outcomes where they do
not interfere.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
from dataclasses import replace

import pytest
from sqlalchemy.orm import Session

import inboxguard
from inboxguard import QuarantineReason
from inboxguard.adapters.faststream.transport import FastStreamTransport
from inboxguard.errors import UnroutableMessageError
from inboxguard.outbox import OutboxMessage
from integrations.faststream.brokers import declare, kind, make_broker
from tests.adapters.generic_support import hold_claim_while, paid, payments, wait_until
from tests.conftest import DUPLICATED_COMMANDS

from .conftest import FastStreamSetup

pytestmark = [pytest.mark.e2e, pytest.mark.postgresql]

#: Commands of the kill test: the first half is published before the first
#: run, the second half after it was killed.
COMMANDS = 40
#: Where the worker is made to stop, and killed: inside the transaction, then
#: (in the next run) after the commit with the acknowledgement not sent. The
#: second is published only after the first run died, so no earlier run can
#: have taken it (runs process several deliveries at once).
IN_BODY, BEFORE_ACK = 10, 30


def barrier(setup: FastStreamSetup, name: str = "barrier") -> None:
    setup.send({"command_id": name, "amount": 0})
    wait_until(lambda: paid(setup.engine, setup.config.prefix, name), 120, f"{name} applied")
    wait_until(setup.deliveries.settled, 30, "every delivery settled")


def test_f1_duplicated_publishing_applies_each_command_exactly_once(
    fs_setup: FastStreamSetup,
) -> None:
    count = DUPLICATED_COMMANDS
    rng = random.Random(18)
    bodies = [
        {"command_id": f"pay-{i}", "amount": i}
        for i in range(count)
        for _ in range(rng.choice((2, 3)))
    ]
    rng.shuffle(bodies)
    fs_setup.send(*bodies, in_order=False)  # shuffled anyway: publish concurrently
    with fs_setup.worker() as worker:
        barrier(fs_setup)
    # Copies racing each other (RabbitMQ runs up to 10 deliveries at once) meet
    # at the claim; the loser is retried: every extra delivery is a logged retry.
    retries = worker.log.read_text().count("; retrying in")
    assert len(fs_setup.deliveries.all()) == len(bodies) + 1 + retries
    assert payments(fs_setup.engine, fs_setup.config.prefix) == (count + 1, count + 1)
    assert fs_setup.inbox.quarantined() == []
    assert fs_setup.waiting() == 0


def test_f2_kill_9_inside_the_transaction_and_before_the_ack_loses_nothing(
    fs_setup: FastStreamSetup,
) -> None:
    prefix = fs_setup.config.prefix
    half = COMMANDS // 2
    batches = {IN_BODY: range(half), BEFORE_ACK: range(half, COMMANDS)}
    # settled deliveries of each killed command after its kill (a killed run's
    # log is dropped: its last deliveries never settle)
    after_kill = {IN_BODY: 0, BEFORE_ACK: 0}
    for hang, at, applied in [
        ("INBOXGUARD_HANG_IN_BODY", IN_BODY, []),
        ("INBOXGUARD_HANG_BEFORE_ACK", BEFORE_ACK, [BEFORE_ACK]),
    ]:
        fs_setup.send(*({"command_id": f"pay-{i}", "amount": i} for i in batches[at]))
        with fs_setup.worker(**{hang: f"pay-{at}"}) as worker:
            wait_until(lambda: f"hang pay-{at}" in worker.log.read_text(), 60, "the hang")  # noqa: B023
            worker.kill9()
        # the hang stops the whole process; RabbitMQ runs up to 10 deliveries at
        # once, so how many others committed first varies, the killed one does not
        assert paid(fs_setup.engine, prefix, f"pay-{at}") == applied
        assert payments(fs_setup.engine, prefix)[0] == payments(fs_setup.engine, prefix)[1]
        if at == BEFORE_ACK:
            after_kill[IN_BODY] += settled(fs_setup, f"pay-{IN_BODY}")
        fs_setup.deliveries.forget()
    with fs_setup.worker():
        wait_until(lambda: payments(fs_setup.engine, prefix)[1] == COMMANDS, 60, "every payment")
        # the delivery killed after its commit comes back (JetStream: after ack_wait)
        wait_until(lambda: settled(fs_setup, f"pay-{BEFORE_ACK}"), 30, "the killed delivery again")
        barrier(fs_setup)
    after_kill[IN_BODY] += settled(fs_setup, f"pay-{IN_BODY}")
    after_kill[BEFORE_ACK] += settled(fs_setup, f"pay-{BEFORE_ACK}")
    assert payments(fs_setup.engine, prefix) == (COMMANDS + 1, COMMANDS + 1)
    # each killed command was settled exactly once after its kill (RabbitMQ and
    # the two Redis subscribers run deliveries concurrently, so the second kill
    # may also catch a delivery of the first killed command in flight: that
    # one never settled, and came back)
    assert after_kill == {IN_BODY: 1, BEFORE_ACK: 1}
    assert paid(fs_setup.engine, prefix, f"pay-{IN_BODY}") == [IN_BODY]
    assert paid(fs_setup.engine, prefix, f"pay-{BEFORE_ACK}") == [BEFORE_ACK]
    assert fs_setup.waiting() == 0


def settled(setup: FastStreamSetup, command_id: str) -> int:
    """Deliveries of ``command_id`` the worker settled (acked or rejected)."""
    return setup.deliveries.path.read_text().split().count(f"+{command_id}")


def test_f3_f4_f5_refusals_retry_cap_and_outbox_relay(fs_setup: FastStreamSetup) -> None:
    """One worker session: an outbox row relayed by the FastStream transport and
    sent again (a dispatcher crash) is applied once; a mismatch is quarantined
    and never delivered again; a claim held elsewhere is retried up to the cap,
    then quarantined as retries_exhausted."""
    prefix = fs_setup.config.prefix
    outbox = relay_with_a_resend(fs_setup)
    busy = {"command_id": "busy", "amount": 3}
    with fs_setup.worker():
        fs_setup.send({"command_id": "m1", "amount": 5})
        wait_until(lambda: paid(fs_setup.engine, prefix, "m1"), 30, "m1 applied")
        fs_setup.send({"command_id": "m1", "amount": 7}, headers={"trace": "t-1"})
        refused_at = time.monotonic()
        hold_claim_while(
            fs_setup.engine,
            fs_setup.inbox,
            busy,
            lambda: fs_setup.send(busy),
            lambda: len(fs_setup.inbox.quarantined("payments")) == 2,
        )
        # past the Redis claim idle time and the JetStream ack_wait (2 s): a
        # refusal left pending would have been delivered again by now
        wait_until(lambda: time.monotonic() - refused_at > 2.5, 5, "the redelivery windows")
        barrier(fs_setup)
    by_reason = {r.reason: r for r in fs_setup.inbox.quarantined("payments")}
    assert set(by_reason) == {
        QuarantineReason.PAYLOAD_MISMATCH,
        QuarantineReason.RETRIES_EXHAUSTED,
    }
    mismatch = by_reason[QuarantineReason.PAYLOAD_MISMATCH]
    assert mismatch.details is not None
    assert mismatch.details["body"] == {"command_id": "m1", "amount": 7}
    assert mismatch.details["headers"]["trace"] == "t-1"
    assert paid(fs_setup.engine, prefix, "m1") == [5]
    assert fs_setup.deliveries.of("m1") == 2
    exhausted = by_reason[QuarantineReason.RETRIES_EXHAUSTED]
    assert exhausted.details is not None
    if fs_setup.broker == "nats":
        # The attempt is JetStream's own delivery count, which nats-server before
        # the 2024 fixes (nats-server#5305, #5338) can reset to 1 on a redelivery
        # (seen: 1, 2, 1, 4): the command may get extra attempts, never fewer.
        assert exhausted.details["attempt"] >= 3
        assert fs_setup.deliveries.of("busy") >= 3
    else:
        assert exhausted.details["attempt"] == 3
        assert fs_setup.deliveries.of("busy") == 3
    assert paid(fs_setup.engine, prefix, "busy") == []
    assert paid(fs_setup.engine, prefix, "ob-1") == [9]
    assert fs_setup.deliveries.of("ob-1") == 2
    assert outbox.status().backlog == 0
    assert fs_setup.waiting() == 0
    outbox.drop_schema()


def relay_with_a_resend(setup: FastStreamSetup) -> inboxguard.Outbox:
    """Relay one outbox row through FastStreamTransport, then send it again as a
    dispatcher that died after the publish would; on RabbitMQ, a message no
    queue receives is refused as unroutable."""
    config = setup.config
    outbox = inboxguard.Outbox(setup.engine, table_prefix=f"{config.prefix}o_")
    outbox.create_schema()
    body = {"command_id": "ob-1", "amount": 9}
    with Session(setup.engine) as session, session.begin():
        outbox.add(session, command_id="ob-1", destination=config.queue, payload=body)
    asyncio.run(declare(config))
    stream = config.queue if kind(config.broker_url) == "nats" else None
    transport = FastStreamTransport(make_broker(config), stream=stream)
    try:
        assert inboxguard.Dispatcher(outbox, transport).run_once() == 1
        resend = OutboxMessage(
            command_id="ob-1",
            destination=config.queue,
            payload=body,
            headers={"x-inbox-command-id": "ob-1"},
            digest="",
            created_at=dt.datetime.now(dt.UTC),
        )
        assert transport(resend)["command_id"] == "ob-1"
        if kind(config.broker_url) == "rabbit":
            with pytest.raises(UnroutableMessageError, match="no queue is bound"):
                transport(replace(resend, destination=f"{config.queue}-nobody"))
    finally:
        transport.close()
    return outbox
