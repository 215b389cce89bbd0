"""bind=True and default_retry_delay: what the guard digests, and how the retry
delay enters the replay window the worker checks at start."""

import tempfile
from datetime import timedelta
from pathlib import Path

from celery import Celery
from sqlalchemy import create_engine
from sqlalchemy.orm import sessionmaker

import inboxguard
from inboxguard.adapters.celery import check_alignment, inbox_task, replay_windows

app = Celery("billing", broker="memory://")
engine = create_engine(f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}")
inbox = inboxguard.Inbox(
    engine, retention=inboxguard.RetentionPolicy(dead_letter_replay=timedelta(days=14))
)
inbox.create_schema()
Session = sessionmaker(engine)


# --8<-- [start:bound]
@inbox_task(
    inbox,
    session_factory=Session,
    command_id="invoice_id",  # names a task argument: `self` is skipped
    consumer="billing.settle",
    bind=True,  # the first parameter is the task, never part of the payload
    max_retries=100,
    default_retry_delay=6 * 3600,  # 6 hours between retries ...
)
def settle(self, invoice_id: str, cents: int) -> dict:
    return {"settled": invoice_id, "attempt": self.request.retries}


# ... so the retry schedule can last 100 x 6 h = 25 days, longer than the
# inbox's 15-day horizon: a worker would refuse to start.
try:
    check_alignment(app)  # what `celery worker` runs before it consumes
except inboxguard.RetentionMisalignedError as exc:
    assert "retry_schedule" in str(exc)
# --8<-- [end:bound]
else:
    raise AssertionError("a 25-day retry schedule must not fit a 15-day horizon")

[windows] = [w for w in replay_windows(app) if w.task == settle.name]
assert windows.windows["retry_schedule"] == timedelta(hours=600)
assert settle.apply(args=("inv-1", 100)).get() == {"settled": "inv-1", "attempt": 0}
assert settle.apply(args=("inv-1", 100)).get() == {"settled": "inv-1", "attempt": 0}  # duplicate
