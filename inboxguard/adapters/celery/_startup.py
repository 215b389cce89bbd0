"""Signal receivers: stamp the publish time, refuse to start a misaligned worker."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from celery import signals

from inboxguard import ConfigurationError, InboxStore, RetentionMisalignedError
from inboxguard._core import headers as _headers
from inboxguard._core.retention import CheckedWindow, Window, format_duration
from inboxguard.adapters._fork import engines_of, release_in_parent, track
from inboxguard.adapters._startup_checks import log_alignment_passed, require_tables
from inboxguard.adapters.celery._guarantee import register_task, use_window_source
from inboxguard.adapters.celery._options import check_acks, check_declared
from inboxguard.adapters.celery._quiet import install_filter
from inboxguard.adapters.celery._task import SENT_AT_HEADER, InboxTask

__all__ = [
    "ReplayWindows",
    "check_alignment",
    "check_worker",
    "install_receivers",
    "replay_windows",
    "stamp_sent_at",
]

logger = logging.getLogger("inboxguard.celery")

#: kombu's default visibility timeouts, by broker URL scheme.
_VISIBILITY_DEFAULTS = {
    "redis": 3600,
    "rediss": 3600,
    "redis+socket": 3600,
    "sentinel": 3600,
    "sqs": 1800,
}
#: Celery setting holding replay windows declared for every inbox task.
REPLAY_WINDOWS_SETTING = "inboxguard_replay_windows"


@dataclass(frozen=True, slots=True)
class ReplayWindows:
    """Windows through which one inbox task's messages can come back."""

    inbox: InboxStore
    task: str
    windows: dict[str, dt.timedelta]
    #: Where each window was found, by window name.
    sources: dict[str, str]

    def as_windows(self) -> tuple[Window, ...]:
        """Each window as a :class:`~inboxguard._core.retention.Window`."""
        return tuple(Window(n, length, self.sources[n]) for n, length in self.windows.items())


def stamp_sent_at(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """``before_task_publish`` receiver: record when a task was first published.

    An existing stamp is kept, so a ``retry()`` (which
    re-sends the request's custom headers) carries the original publish time.
    """
    if isinstance(headers, dict) and _headers.sent_at_of(headers) is None:
        headers[SENT_AT_HEADER] = dt.datetime.now(dt.UTC).isoformat()


def replay_windows(app: Any) -> list[ReplayWindows]:
    """Discover, per inbox task of ``app``, how long its messages can come back.

    Windows: the broker's ``visibility_timeout`` (Redis, SQS), the retry
    schedule (``max_retries`` x the longest backoff step), the windows
    declared in the ``inboxguard_replay_windows`` setting and the task's
    ``inbox_replay_windows`` option.

    Raises:
        ConfigurationError: a declared window is not a duration.
    """
    found: list[ReplayWindows] = []
    declared = _durations(app.conf.get(REPLAY_WINDOWS_SETTING) or {}, REPLAY_WINDOWS_SETTING)
    visibility = _visibility_timeout(app)
    for name in sorted(app.tasks):
        task = app.tasks[name]
        if not isinstance(task, InboxTask) or task.inbox is None:
            continue
        windows: dict[str, dt.timedelta] = {}
        sources: dict[str, str] = {}
        if visibility is not None:
            windows["visibility_timeout"] = visibility
            sources["visibility_timeout"] = "celery broker_transport_options"
        schedule = _retry_schedule(task)
        if schedule is not None:
            windows["retry_schedule"] = schedule
            sources["retry_schedule"] = (
                f"task {name}: max_retries={task.max_retries} x longest backoff step"
            )
        own = _durations(task.inbox_replay_windows or {}, f"{name}.inbox_replay_windows")
        for where, group in (
            (REPLAY_WINDOWS_SETTING, declared),
            (f"{name}.inbox_replay_windows", own),
        ):
            windows.update(group)
            sources.update(dict.fromkeys(group, f"celery {where}"))
        found.append(ReplayWindows(task.inbox, name, windows, sources))
    return found


def check_alignment(app: Any) -> None:
    """Check every inbox task's replay windows against its inbox's horizon.

    Raises:
        RetentionMisalignedError: a window is longer than the horizon.
    """
    for item in replay_windows(app):
        for name, length in item.windows.items():
            item.inbox.require_alignment(item.sources[name], **{name: length})
        _warn_short_visibility(item)


def _warn_short_visibility(item: ReplayWindows) -> None:
    """A delivery can wait up to ``lock_timeout`` on another worker's claim;
    a visibility timeout no longer than that redelivers it while it waits."""
    visibility = item.windows.get("visibility_timeout")
    wait = item.inbox.lock_timeout
    if visibility is not None and wait is not None and visibility <= wait:
        logger.warning(
            "task %s: the broker's visibility_timeout (%s) is not longer than the inbox"
            " lock_timeout (%s): a delivery waiting on another worker's claim is delivered"
            " again before its wait ends, and the copies can keep each other busy; raise"
            " visibility_timeout well above lock_timeout plus the task's run time",
            item.task,
            format_duration(visibility),
            format_duration(wait),
        )


def check_worker(app: Any) -> None:
    """Everything a worker checks before it consumes: each guarded task's
    options and ack settings, the inbox tables, the replay windows.

    Raises:
        ConfigurationError: a guarded task is misdeclared or acks failed or
            timed-out deliveries (see ``inbox_accept_ack_on_failure``), or an
            inbox's tables are missing.
        RetentionMisalignedError: a replay window outlives the horizon.
    """
    inboxes: dict[int, InboxStore] = {}
    for name in sorted(app.tasks):
        task = app.tasks[name]
        if isinstance(task, InboxTask):
            check_declared(task)
            register_task(task)
            check_acks(task)
            if task.inbox is not None:  # check_declared refused a task without one
                inboxes.setdefault(id(task.inbox), task.inbox)
                track(engines_of(task.inbox, task.inbox_session_factory))
    for inbox in inboxes.values():
        require_tables(inbox)
    check_alignment(app)


def _refuse_misaligned_worker(sender: Any = None, instance: Any = None, **_: Any) -> None:
    """``celeryd_after_setup`` receiver: stop the worker before it consumes."""
    app = getattr(instance, "app", None)
    if app is None:  # pragma: no cover - Celery always passes the worker
        return
    try:
        check_worker(app)
    except (RetentionMisalignedError, ConfigurationError) as exc:
        logger.critical("inboxguard: refusing to consume: %s", exc)
        # SystemExit passes through Celery's signal dispatch (which swallows
        # Exception) and makes WorkController.start() stop with this code.
        raise SystemExit(1) from exc
    finally:
        # The checks connected in the parent: close those connections before
        # the prefork pool forks (each child starts on a fresh pool anyway).
        release_in_parent()
    found = replay_windows(app)
    checked = [
        CheckedWindow(
            Window(name, length, _named(item, item.sources[name])), item.inbox.retention.horizon
        )
        for item in found
        for name, length in item.windows.items()
    ]
    log_alignment_passed("Celery", len(found), checked)


def _named(item: ReplayWindows, source: str) -> str:
    """``source`` naming its task once (some sources already start with it)."""
    return source if item.task in source else f"task {item.task}: {source}"


def install_receivers() -> None:
    """Connect the publish stamp and the start-up check, and keep Celery from
    logging a refusal the task already logged (idempotent)."""
    install_filter()
    signals.before_task_publish.connect(
        stamp_sent_at, weak=False, dispatch_uid="inboxguard.celery.stamp_sent_at"
    )
    signals.celeryd_after_setup.connect(
        _refuse_misaligned_worker, weak=False, dispatch_uid="inboxguard.celery.alignment"
    )
    signals.worker_before_create_process.connect(
        _release_before_fork, weak=False, dispatch_uid="inboxguard.celery.fork"
    )


def _release_before_fork(**_: Any) -> None:
    """``worker_before_create_process`` receiver: a replacement child
    (``max_tasks_per_child``, a killed child) inherits no pooled connection."""
    release_in_parent()


use_window_source(replay_windows)


def _visibility_timeout(app: Any) -> dt.timedelta | None:
    url = app.conf.broker_url or ""
    if isinstance(url, list | tuple):
        url = url[0] if url else ""
    scheme = urlsplit(str(url)).scheme.lower()
    default = _VISIBILITY_DEFAULTS.get(scheme)
    if default is None:
        return None
    options = app.conf.broker_transport_options or {}
    return dt.timedelta(seconds=float(options.get("visibility_timeout", default)))


def _retry_schedule(task: InboxTask) -> dt.timedelta | None:
    if task.max_retries is None:
        logger.warning(
            "task %s retries without limit (max_retries=None): its retry schedule cannot be"
            " checked against the inbox horizon; the x-inbox-sent-at age check still"
            " refuses messages older than the horizon",
            task.name,
        )
        return None
    step = max(float(task.retry_backoff_max), float(task.default_retry_delay or 0))
    return dt.timedelta(seconds=int(task.max_retries) * step)


def _durations(values: Mapping[str, Any], where: str) -> dict[str, dt.timedelta]:
    if not isinstance(values, Mapping):
        msg = f"{where} must be a mapping of window name to timedelta, got {values!r}"
        raise ConfigurationError(msg)
    out: dict[str, dt.timedelta] = {}
    for name, value in values.items():
        if isinstance(value, dt.timedelta):
            out[str(name)] = value
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[str(name)] = dt.timedelta(seconds=value)
        else:
            msg = f"{where}[{name!r}] must be a timedelta or seconds, got {value!r}"
            raise ConfigurationError(msg)
    return out
