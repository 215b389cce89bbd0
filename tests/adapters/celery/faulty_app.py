"""A Celery app whose one task is declared the way a user might get it wrong.

``celery -A tests.adapters.celery.faulty_app worker``, with the reference
app's settings in the environment and ``IG_FAULT`` naming the variant:

==================  ===================================================================
``typo``            ``inbox_comand_id=`` (misspelled) instead of ``inbox_command_id=``
``bad_argument``    ``inbox_command_id="transfer"``: no such argument
``acks_on_timeout`` ``acks_on_failure_or_timeout=True`` without accepting the loss
``accepted_acks``   the same, with ``inbox_accept_ack_on_failure=True``
``no_recipe``       an engine with the default pool and no ``worker_process_init`` hook
``retry_lost``      ``retry_on_worker_lost=True``
``ack_lost``        ``reject_on_worker_lost=False``; ``accepted_lost`` with its opt-in
``early_ack``       ``acks_late=False``; ``accepted_early`` with its opt-in
(anything else)     a correct declaration with ``@app.task(base=InboxTask, ...)``
==================  ===================================================================

In the correct variant the command ID is computed by a callable that raises
for transfers named ``bad-*``, a transfer named ``naive-*`` returns a naive
datetime (which cannot be stored), and the transfer named by ``IG_SLOW_ONCE``
sleeps past the task's time limit the first time it runs (``IG_TIME_LIMIT``
or ``IG_SOFT_TIME_LIMIT`` seconds), marked by the file ``IG_SLOW_MARKER``.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path
from typing import Any

from celery import signals
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import InboxTask
from integrations.celery import business
from integrations.celery.settings import TASK_NAME, Settings, create_app, declare_dead_letter

settings = Settings.from_env()
app = create_app(settings, include_tasks=False)
FAULT = os.environ.get("IG_FAULT", "")
if FAULT == "no_recipe":
    engine = create_engine(settings.db_url)  # as the quick start makes it
else:
    engine = create_engine(settings.db_url, pool_size=2, max_overflow=2)
Session = sessionmaker(engine)
inbox = business.make_inbox(engine, settings.table_prefix, settings.retention)
TABLES = business.tables(settings.table_prefix)
SLOW_ONCE = os.environ.get("IG_SLOW_ONCE", "")
MARKER = Path(os.environ.get("IG_SLOW_MARKER", "/nonexistent/marker"))


def _command_id(transfer_id: str, account: str, amount: int) -> str:
    if transfer_id.startswith("bad-"):
        return {"known": "x"}[transfer_id]  # raises KeyError, as a buggy callable would
    return transfer_id


options: dict[str, Any] = {
    "base": InboxTask,
    "inbox": inbox,
    "inbox_session_factory": Session,
    "inbox_consumer": "faulty.transfers",
    "name": TASK_NAME,
    "max_retries": 5,
    "retry_backoff_max": 1,
    "inbox_retry_base": 0.2,
    # The app ignores results (integrations/celery/settings.py); C12's unstorable
    # result needs a task whose result is stored, so a duplicate could replay it.
    "ignore_result": False,
}
if FAULT == "typo":
    options["inbox_comand_id"] = "transfer_id"
elif FAULT == "bad_argument":
    options["inbox_command_id"] = "transfer"
else:
    options["inbox_command_id"] = _command_id
if FAULT in {"acks_on_timeout", "accepted_acks"}:
    options["acks_on_failure_or_timeout"] = True
    options["inbox_accept_ack_on_failure"] = FAULT == "accepted_acks"
SETTLEMENT_FAULTS: dict[str, dict[str, Any]] = {
    "retry_lost": {"retry_on_worker_lost": True},
    "ack_lost": {"reject_on_worker_lost": False},
    "accepted_lost": {"reject_on_worker_lost": False, "inbox_accept_ack_on_worker_lost": True},
    "early_ack": {"acks_late": False},
    "accepted_early": {"acks_late": False, "inbox_accept_early_ack": True},
}
options.update(SETTLEMENT_FAULTS.get(FAULT, {}))
for name, env in (("time_limit", "IG_TIME_LIMIT"), ("soft_time_limit", "IG_SOFT_TIME_LIMIT")):
    if os.environ.get(env):
        options[name] = float(os.environ[env])


@app.task(**options)  # type: ignore[untyped-decorator]
def apply_transfer(transfer_id: str, account: str, amount: int) -> Any:
    session = inboxguard.current_session()
    result = business.apply_transfer(session, TABLES, transfer_id, account, amount)
    if transfer_id.startswith("naive-"):
        return {"at": dt.datetime.now()}  # naive: the mistake under test
    if transfer_id == SLOW_ONCE and not MARKER.exists():
        MARKER.write_text("slow once")
        time.sleep(60)  # past the time limit: Celery stops it
    return result


if FAULT != "no_recipe":

    @signals.worker_process_init.connect
    def _fresh_pool(**_: Any) -> None:
        engine.dispose(close=False)


@signals.celeryd_after_setup.connect
def _declare_dead_letter(**_: Any) -> None:
    declare_dead_letter(app, settings)
