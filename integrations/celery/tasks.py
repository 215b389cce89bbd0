"""The guarded task, and the same body without the inbox (the benchmark's baseline).

``apply_transfer_evidence`` is the benchmark's floor, not for users: see its
docstring.
"""

from __future__ import annotations

import time
from typing import Any

from celery import shared_task, signals
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import inbox_task
from integrations.celery import business
from integrations.celery.settings import (
    EVIDENCE_TASK_NAME,
    PLAIN_TASK_NAME,
    TASK_NAME,
    Settings,
)

SETTINGS = Settings.from_env()
engine = create_engine(SETTINGS.db_url, pool_size=2, max_overflow=2)
Session = sessionmaker(engine)
inbox = business.make_inbox(
    engine, SETTINGS.table_prefix, SETTINGS.retention, SETTINGS.lock_timeout
)
TABLES = business.tables(SETTINGS.table_prefix)
#: The evidence task's inbox table, of its own (``python -m benchmarks celery``
#: creates it; nothing else does).
EVIDENCE_INBOX = business.make_inbox(
    engine, f"{SETTINGS.table_prefix}{business.EVIDENCE_PREFIX}", SETTINGS.retention
)


@signals.worker_process_init.connect
def _fresh_pool(**_: Any) -> None:
    # A forked child must not reuse the parent's pooled connections.
    engine.dispose(close=False)


@inbox_task(
    inbox,
    session_factory=Session,
    command_id="transfer_id",
    # Set explicitly: evidence is filed under this name, so renaming the
    # task or its module does not make old commands look new.
    consumer="reference.transfers",
    name=TASK_NAME,
    max_retries=10,
    retry_backoff_max=60,
    # What only we know; the rest of the table is derived from the settings
    # (`inboxguard guarantees --app integrations.celery.app:app`, checked
    # against integrations/celery/guarantees.lock by the test suite).
    guarantee=inboxguard.Guarantee(
        no_external_effect=True,
        terminal_states=("applied (ledger row + balance)", "quarantined"),
    ),
)
def apply_transfer(transfer_id: str, account: str, amount: int) -> dict[str, Any]:
    session = inboxguard.current_session()
    result = business.apply_transfer(
        session, TABLES, transfer_id, account, amount, SETTINGS.task_delay
    )
    if transfer_id == SETTINGS.hang_in_body:
        _hang(transfer_id)
    return result


@signals.task_postrun.connect
def _hang_after_commit(task: Any = None, args: Any = (), **_: Any) -> None:
    # task_postrun runs in the child after the task (and so the inbox's
    # commit), before the parent acks: a kill here leaves a committed,
    # unacked delivery.
    if getattr(task, "name", None) == TASK_NAME and args and args[0] == SETTINGS.hang_after_commit:
        _hang(args[0])


def _hang(transfer_id: str) -> None:
    """Stop for good, announcing it, so a test can ``kill -9`` at this point."""
    print(f"hang {transfer_id}", flush=True)
    time.sleep(3600)


@shared_task(name=PLAIN_TASK_NAME, acks_late=True, reject_on_worker_lost=True)
def apply_transfer_plain(transfer_id: str, account: str, amount: int) -> dict[str, Any]:
    with Session.begin() as session:
        return business.apply_transfer(
            session, TABLES, transfer_id, account, amount, SETTINGS.task_delay
        )


@shared_task(name=EVIDENCE_TASK_NAME, acks_late=True, reject_on_worker_lost=True)
def apply_transfer_evidence(transfer_id: str, account: str, amount: int) -> dict[str, Any]:
    """The benchmark's floor, not for users: the plain task plus the inbox row alone.

    One plain ``INSERT ... VALUES ... ON CONFLICT DO NOTHING`` of the inbox
    row's six columns into an inbox table of its own, then the plain body, in
    the same transaction; a row already there (a duplicate) skips the body.
    No claim logic, no payload check, no result, no inboxguard Python: the
    cheapest any guard that writes the evidence can be (``evidence_statement``
    and ``evidence_row`` of ``benchmarks/bench_inbox.py``). It gives none of
    the guarantees; ``python -m benchmarks celery`` measures the guarded task
    against it.
    """
    from benchmarks.bench_inbox import evidence_row, evidence_statement

    with Session.begin() as session:
        claim = session.execute(evidence_statement(EVIDENCE_INBOX), evidence_row(transfer_id))
        if not claim.rowcount:
            return {"transfer_id": transfer_id, "duplicate": True}
        return business.apply_transfer(
            session, TABLES, transfer_id, account, amount, SETTINGS.task_delay
        )
