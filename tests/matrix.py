"""The settings matrix: for each framework and broker, real workers under the
settlement settings each adapter accepts, and the faults that decide
settlement, each cell proven by an end-to-end test of the suite.

``python -m tests.matrix`` runs every cell (real services, several minutes)
and writes the table of that run into docs/guarantees.md between
``<!-- matrix -->`` and ``<!-- /matrix -->``; ``--list`` prints the cells,
``--framework Celery`` runs one framework's cells (and writes nothing);
``--report FILE`` runs nothing and writes the table from the JUnit report of
a run that included every cell (``make test PYTEST_ARGS=--junitxml=FILE``).
The same tests run in ``make test``; this command runs them as one table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "guarantees.md"
BLOCK = re.compile(r"(<!-- matrix -->\n)(.*?)(<!-- /matrix -->)", re.DOTALL)

CELERY = "tests/adapters/celery/"
DRAMATIQ = "tests/adapters/dramatiq/"
FASTSTREAM = "tests/adapters/faststream/"
KOMBU = "tests/adapters/kombu/"
AIO = "tests/adapters/asyncio/"
DEFAULTS = "accepted defaults"


@dataclass(frozen=True, slots=True)
class Cell:
    """One setting under one fault, and the test that plays it."""

    framework: str
    broker: str
    setting: str
    fault: str
    test: str

    @property
    def path(self) -> Path:
        return ROOT / self.test.split("::", 1)[0]

    @property
    def function(self) -> str:
        return self.test.split("::", 1)[1].split("[", 1)[0]


def _cells() -> list[Cell]:
    c2 = "test_celery_e2e.py::test_c2_kill9_mid_batch_loses_nothing_and_applies_nothing_twice"
    c9 = (
        "test_celery_settle_e2e.py::"
        "test_c9_a_database_outage_is_retried_and_every_command_applied_once"
    )
    c3 = "test_celery_e2e.py::test_c3_mismatched_redelivery_is_quarantined_and_dead_lettered"
    c12 = (
        "test_celery_settle_e2e.py::"
        "test_c12_an_unusable_command_id_or_result_is_quarantined_and_dead_lettered"
    )
    c1920 = (
        "test_celery_settlement_e2e.py::"
        "test_c19_c20_a_setting_that_can_lose_a_command_refuses_to_start_the_worker"
    )
    d2 = "test_e2e.py::test_d2_kill9_mid_batch_loses_nothing_applies_nothing_twice"
    f2 = (
        "test_faststream_e2e.py::"
        "test_f2_kill_9_inside_the_transaction_and_before_the_ack_loses_nothing"
    )
    f3 = "test_faststream_e2e.py::test_f3_f4_f5_refusals_retry_cap_and_outbox_relay"
    k_kill = "test_kombu_e2e.py::test_kill_9_mid_stream_loses_nothing_and_applies_nothing_twice"
    k_out = (
        "test_kombu_outage_e2e.py::"
        "test_k7_an_outage_longer_than_the_retries_requeues_and_keeps_consuming"
    )
    k_mis = "test_kombu_e2e.py::test_mismatch_is_quarantined_with_the_message_and_not_redelivered"
    a_kill = "test_asyncio_e2e.py::test_kill_9_mid_stream_loses_nothing_and_applies_nothing_twice"
    a_mis = "test_asyncio_e2e.py::test_mismatch_is_quarantined_with_the_message_and_not_redelivered"
    cells = []
    for broker, key in (("Redis", "redis"), ("RabbitMQ", "rabbitmq")):
        cells += [
            Cell(
                "Celery", broker, DEFAULTS, "kill -9 of a child mid batch", f"{CELERY}{c2}[{key}]"
            ),
            Cell(
                "Celery",
                broker,
                DEFAULTS,
                "database outage past the retries",
                f"{CELERY}{c9}[{key}]",
            ),
            Cell("Celery", broker, DEFAULTS, "payload mismatch", f"{CELERY}{c3}[{key}]"),
            Cell(
                "Celery", broker, DEFAULTS, "unusable command ID / result", f"{CELERY}{c12}[{key}]"
            ),
        ]
    cells += [
        Cell(
            "Celery",
            "Redis",
            "module-level engine, default pool, no recipe, -c 2",
            "prefork children on one connection",
            f"{CELERY}test_celery_settlement_e2e.py::"
            "test_c18_prefork_children_never_share_the_parents_pooled_connection[redis]",
        ),
        Cell(
            "Celery",
            "RabbitMQ",
            DEFAULTS,
            "broker connection cut (TCP proxy)",
            f"{CELERY}test_celery_settlement_e2e.py::"
            "test_c21_a_broker_connection_cut_mid_run_loses_nothing_and_applies_nothing_twice",
        ),
        Cell(
            "Celery",
            "Redis",
            "reject_on_worker_lost=False + inbox_accept_ack_on_worker_lost",
            "accepted loss starts",
            f"{CELERY}test_celery_settlement_e2e.py::test_c20_an_accepted_loss_starts_the_worker",
        ),
    ]
    for param, setting in (
        ("retry_lost-retry_on_worker_lost=True", "retry_on_worker_lost=True"),
        ("ack_lost-inbox_accept_ack_on_worker_lost=True", "reject_on_worker_lost=False"),
        ("early_ack-inbox_accept_early_ack=True", "acks_late=False"),
    ):
        cells.append(
            Cell(
                "Celery",
                "Redis",
                setting,
                "refused before the first delivery",
                f"{CELERY}{c1920}[{param}]",
            )
        )
    for broker, key in (("Redis", "redis"), ("RabbitMQ", "rabbitmq")):
        for point in ("mid-transaction", "after-commit-before-ack"):
            cells.append(
                Cell(
                    "Dramatiq",
                    broker,
                    DEFAULTS,
                    f"kill -9 {point.replace('-', ' ')}",
                    f"{DRAMATIQ}{d2}[{point}-{key}]",
                )
            )
    cells += [
        Cell(
            "Dramatiq",
            "stub broker",
            "max_retries=0",
            "database outage (TCP proxy cut)",
            f"{DRAMATIQ}test_settlement.py::"
            "test_d17_max_retries_zero_during_an_outage_never_dead_letters_without_a_record",
        ),
    ]
    d20 = "test_settlement.py::test_d20_every_accepted_retry_setting_survives_an_outage"
    for param, setting in (
        ("max_retries=1", "max_retries=1"),
        ("retry_when", "retry_when=callable"),
    ):
        cells.append(
            Cell(
                "Dramatiq",
                "stub broker",
                setting,
                "database outage (TCP proxy cut)",
                f"{DRAMATIQ}{d20}[{param}]",
            )
        )
    cells += [
        Cell(
            "Dramatiq",
            "stub broker",
            "max_retries=None",
            "refused before the first delivery",
            f"{DRAMATIQ}test_settlement.py::"
            "test_d20_unbounded_retries_are_refused_before_the_first_delivery",
        ),
        Cell(
            "Dramatiq",
            "stub broker",
            "max_age (AgeLimit)",
            "refused before the first delivery",
            f"{DRAMATIQ}test_settlement.py::"
            "test_d18_an_actor_setting_not_known_to_be_safe_refuses_the_worker[max_age]",
        ),
        Cell(
            "Dramatiq",
            "any",
            "module-level engine, forked worker process",
            "child on the parent's connection",
            f"{DRAMATIQ}test_fork.py::"
            "test_d16_a_forked_worker_process_never_uses_the_parents_pooled_connection",
        ),
        Cell(
            "Dramatiq",
            "Redis",
            DEFAULTS,
            "quarantine write fails",
            f"{DRAMATIQ}test_settle_e2e.py::"
            "test_d12_a_quarantine_record_that_cannot_be_written_keeps_the_message[redis]",
        ),
    ]
    for broker, key in (("RabbitMQ", "rabbitmq"), ("Redis Streams", "redis"), ("NATS", "nats")):
        cells += [
            Cell(
                "FastStream",
                broker,
                DEFAULTS,
                "kill -9 in the transaction / before the ack",
                f"{FASTSTREAM}{f2}[{key}]",
            ),
            Cell(
                "FastStream",
                broker,
                DEFAULTS,
                "refusals, raising handler past the cap",
                f"{FASTSTREAM}{f3}[{key}]",
            ),
        ]
    cells.append(
        Cell(
            "FastStream",
            "RabbitMQ",
            "AckPolicy.ACK_FIRST, no check_startup",
            "refused on the delivery path",
            f"{FASTSTREAM}test_faststream_settlement.py::"
            "test_f14_ack_first_is_refused_on_the_delivery_path_itself",
        )
    )
    fs_settle = f"{FASTSTREAM}test_faststream_settlement.py::"
    f16 = "test_f16_a_jetstream_cap_above_max_attempts_outlives_a_database_outage"
    for param, setting in (
        ("unlimited", "max_deliver=-1"),
        ("above-max-attempts", "max_deliver > max_attempts"),
    ):
        cells.append(
            Cell(
                "FastStream",
                "NATS",
                setting,
                "database outage past the retries",
                f"{fs_settle}{f16}[{param}]",
            )
        )
    f17 = "test_f17_every_accepted_ack_policy_retries_a_raising_handler"
    for policy in ("nack_on_error", "ack", "manual"):
        cells.append(
            Cell(
                "FastStream",
                "RabbitMQ",
                f"ack_policy={policy}",
                "raising handler",
                f"{fs_settle}{f17}[{policy}]",
            )
        )
    f12 = "test_f12_jetstream_max_deliver_must_exceed_max_attempts"
    cells += [
        Cell(
            "FastStream",
            "NATS",
            "max_deliver <= max_attempts",
            "refused before the first delivery",
            f"{fs_settle}{f12}[{param}]",
        )
        for param in ("equal", "below")
    ]
    cells += [
        *(
            Cell(
                "FastStream",
                "NATS",
                f"ConsumerConfig.ack_policy={policy}",
                "refused before the first delivery",
                f"{fs_settle}test_f13_a_jetstream_consumer_acks_each_message_explicitly[{policy}0]",
            )
            for policy in ("all", "none")
        ),
        Cell(
            "FastStream",
            "Redis Streams",
            "group without a claiming subscriber",
            "refused before the first delivery",
            f"{fs_settle}test_f15_a_redis_group_without_a_claiming_subscriber_is_refused",
        ),
    ]
    for broker, key in (("RabbitMQ", "rabbitmq"), ("Redis", "redis")):
        for point in ("mid-transaction", "after-commit-before-ack"):
            cells.append(
                Cell(
                    "kombu",
                    broker,
                    DEFAULTS,
                    f"kill -9 {point.replace('-', ' ')}",
                    f"{KOMBU}{k_kill}[{key}-{point}]",
                )
            )
        cells += [
            Cell(
                "kombu",
                broker,
                DEFAULTS,
                "database outage past the retries",
                f"{KOMBU}{k_out}[{key}]",
            ),
            Cell("kombu", broker, DEFAULTS, "payload mismatch", f"{KOMBU}{k_mis}[{key}]"),
        ]
    cells.append(
        Cell(
            "kombu",
            "RabbitMQ",
            "no_ack=True",
            "quarantined, never run",
            f"{KOMBU}test_kombu_settlement.py::test_k13_a_no_ack_consumer_is_quarantined_never_run",
        )
    )
    cells += [
        Cell(
            "kombu",
            "RabbitMQ",
            f"topic exchange with two queues, {route}",
            f"raising handler ({what})",
            f"{KOMBU}test_kombu_settlement.py::"
            f"test_k15_a_retry_copy_goes_back_to_its_own_queue_only[{key}]",
        )
        for route, what, key in (
            ("queue given", "retry copy", "queue-given"),
            ("no queue", "handed back", "no-queue"),
        )
    ]
    for point in ("mid-transaction", "after-commit-before-ack"):
        cells.append(
            Cell(
                "aio-pika",
                "RabbitMQ",
                "default exchange + queue",
                f"kill -9 {point.replace('-', ' ')}",
                f"{AIO}{a_kill}[rabbitmq-{point}]",
            )
        )
    cells += [
        Cell(
            "aio-pika",
            "RabbitMQ",
            "default exchange + queue",
            "payload mismatch",
            f"{AIO}{a_mis}[rabbitmq]",
        ),
        Cell(
            "aio-pika",
            "RabbitMQ",
            "topic exchange, default exchange + queue",
            "raising handler (retry copy)",
            f"{AIO}test_aio_pika_settlement.py::"
            "test_a13_a_retry_copy_returns_to_the_queue_the_delivery_came_from[queue-given]",
        ),
        Cell(
            "aio-pika",
            "RabbitMQ",
            "topic exchange, default exchange, no queue",
            "raising handler (handed back)",
            f"{AIO}test_aio_pika_settlement.py::"
            "test_a13_a_retry_copy_returns_to_the_queue_the_delivery_came_from[no-queue]",
        ),
        Cell(
            "aio-pika",
            "RabbitMQ",
            "topic exchange, named exchange",
            "raising handler (retry copy)",
            f"{AIO}test_aio_pika_settlement.py::"
            "test_a15_a_named_exchange_copies_back_under_the_deliverys_routing_key",
        ),
        Cell(
            "aio-pika",
            "RabbitMQ",
            "no_ack=True",
            "quarantined, never run",
            f"{AIO}test_aio_pika_settlement.py::test_a14_a_no_ack_consumer_is_quarantined_never_run",
        ),
    ]
    return cells


CELLS = _cells()


def run(cells: list[Cell]) -> dict[str, str]:
    """Run the cells' tests in one pytest process; each test's outcome."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "matrix.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            *[c.test for c in cells],
        ]
        subprocess.run(cmd, cwd=ROOT, check=False)
        return outcomes_of(report)


def outcomes_of(report: Path) -> dict[str, str]:
    """Each test's outcome in the JUnit report ``report``."""
    tree = ET.parse(report)
    outcomes: dict[str, str] = {}
    for case in tree.iter("testcase"):
        module = (case.get("classname") or "").replace(".", "/") + ".py"
        node = f"{module}::{case.get('name')}"
        tags = {child.tag for child in case}
        outcomes[node] = (
            "failed"
            if tags & {"failure", "error"}
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
    return outcomes


def render(
    cells: list[Cell], outcomes: dict[str, str], when: str, how: str = "`python -m tests.matrix`"
) -> str:
    """The table of one run (``how``: the command that ran it)."""
    lines = [
        f"Last run: {when}, {how}"
        f" ({sum(outcomes.get(c.test) == 'passed' for c in cells)} of {len(cells)} cells passed).",
        "",
        "| framework | broker | setting | fault | result | test |",
        "|---|---|---|---|---|---|",
    ]
    for c in cells:
        name = c.test.split("/")[-1]
        result = outcomes.get(c.test, "not run")
        lines.append(
            f"| {c.framework} | {c.broker} | {c.setting} | {c.fault} | {result} | `{name}` |"
        )
    return "\n".join(lines) + "\n"


def write(table: str) -> None:
    """Put ``table`` into docs/guarantees.md's matrix block."""
    text = PAGE.read_text()
    PAGE.write_text(BLOCK.sub(lambda m: m.group(1) + table + m.group(3), text))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.matrix", description=__doc__)
    parser.add_argument("--list", action="store_true", help="print the cells and exit")
    parser.add_argument("--framework", help="run only this framework's cells; write nothing")
    parser.add_argument(
        "--report", type=Path, help="write the table from this JUnit report; run nothing"
    )
    args = parser.parse_args(argv)
    cells = [c for c in CELLS if args.framework in (None, c.framework)]
    if args.list:
        for c in cells:
            print(f"{c.framework:10} {c.broker:14} {c.setting:45} {c.fault:40} {c.test}")
        return 0
    how = "`python -m tests.matrix`"
    if args.report is not None:
        outcomes = outcomes_of(args.report)
        stamp = dt.datetime.fromtimestamp(args.report.stat().st_mtime, dt.UTC)
        how = "the cells' tests in `make test`, read with `python -m tests.matrix --report`"
    else:
        outcomes = run(cells)
        stamp = dt.datetime.now(dt.UTC)
    when = stamp.strftime("%Y-%m-%d %H:%M UTC")
    table = render(cells, outcomes, when, how)
    print(table)
    if args.framework is None:
        write(table)
    return 0 if all(outcomes.get(c.test) == "passed" for c in cells) else 1


if __name__ == "__main__":
    sys.exit(main())
