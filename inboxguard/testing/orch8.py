"""A stand-in for the Orch8 engine's worker protocol, for tests (a test double).

The engine itself cannot be installed everywhere a test suite runs, so this is
a small HTTP server written from the requests ``orch8-io-sdk`` 0.2.0 sends and
the engine's documented worker protocol, pinned to the behaviour of engine
v0.7.1 (the release that SDK speaks):

* ``POST /workers/tasks/poll`` (also under ``/api/v1``) claims up to ``limit``
  pending tasks of one handler for ``worker_id``; before it does, the reaper
  re-offers every claimed task whose last heartbeat is older than
  ``reap_after``: same task ``id``, same ``attempt``, pending again.
* ``POST /workers/tasks/{id}/heartbeat``, ``/complete`` and ``/fail`` are
  accepted only from the worker that holds the claim; anyone else gets 404.
* a retryable ``fail`` ends the task and, while attempts remain, creates a
  new task for the same step (new ``id``, ``attempt + 1``); a non-retryable
  one, or the last attempt, fails the step; the new task is offered after
  ``retry_backoff`` (or at once after :meth:`release_retries`).
* ``claim_epoch=True`` gives the answer of the engine's unreleased main: each
  claim carries a ``claim_epoch``, and a stale completion, failure or
  heartbeat is answered 409 (``conflict: worker task lease changed``) instead
  of 404. Only that answer: a request without an epoch (SDK 0.2.0 sends
  none) is still checked by ``worker_id``, where main requires the epoch.

It proves code against the protocol, not against the engine. It binds
127.0.0.1 on a free port. Time comes from ``clock`` (a
:class:`~inboxguard.testing.ManualClock` to move it by hand); :meth:`expire`
makes claims quiet at once, so a test never waits for the reaper.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = ["StandInEngine"]

_ROUTE = re.compile(
    r"^(?:/api/v1)?/workers/tasks(?:/(?P<id>[^/]+)/(?P<action>\w+)|/(?P<poll>poll))?$"
)
STALE_409 = "conflict: worker task lease changed"


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _at(task: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(task["available_at"])


class StandInEngine:
    """An in-memory Orch8 worker API on 127.0.0.1 (see the module doc).

    Args:
        claim_epoch: answer stale requests 409 and fence claims by epoch (the
            engine's main) instead of 404 by worker ID (v0.7.1).
        reap_after: how long a claimed task may stay quiet (no heartbeat)
            before the reaper re-offers it.
        max_attempts: attempts a step gets (the block's retry policy).
        retry_backoff: how long a retry waits before it is offered.
        clock: zero-argument callable returning an aware datetime.
    """

    def __init__(
        self,
        *,
        claim_epoch: bool = False,
        reap_after: dt.timedelta = dt.timedelta(seconds=60),
        max_attempts: int = 3,
        retry_backoff: dt.timedelta = dt.timedelta(0),
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.claim_epoch = claim_epoch
        self.reap_after = reap_after
        self.max_attempts = max_attempts
        self.retry_backoff = retry_backoff
        self.clock = clock or _utc_now
        #: Requests answered, by ``(action, status)``: ``("complete", 404)``.
        self.calls: Counter[tuple[str, int]] = Counter()
        self._tasks: dict[str, dict[str, Any]] = {}
        self._lose: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> StandInEngine:
        """Serve on a free port of 127.0.0.1 in a background thread."""
        engine = self

        class _Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                engine._serve(self, "POST")

            def do_GET(self) -> None:
                engine._serve(self, "GET")

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="orch8-stand-in", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> StandInEngine:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """The base URL to give ``orch8.Orch8Client``."""
        if self._server is None:
            msg = "the stand-in engine is not started; call start() or use it as a context manager"
            raise RuntimeError(msg)
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- the test's side ------------------------------------------------------------------

    def add_task(
        self,
        handler_name: str,
        *,
        instance_id: str | None = None,
        block_id: str = "step",
        params: Any = None,
        context: Any = None,
        timeout_ms: int | None = None,
    ) -> str:
        """Queue the first task of a step; return its task ID."""
        with self._lock:
            task = self._new_task(
                handler_name=handler_name,
                instance_id=instance_id or str(uuid.uuid4()),
                block_id=block_id,
                params=params,
                context=context,
                attempt=0,
                timeout_ms=timeout_ms,
            )
            return str(task["id"])

    def task(self, task_id: str) -> dict[str, Any]:
        """A copy of one task as the engine holds it."""
        with self._lock:
            return dict(self._tasks[task_id])

    def tasks(
        self, instance_id: str | None = None, block_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Copies of the tasks (of one step, when given), oldest first."""
        with self._lock:
            return [
                dict(t)
                for t in self._tasks.values()
                if instance_id in (None, t["instance_id"]) and block_id in (None, t["block_id"])
            ]

    def step_state(self, instance_id: str, block_id: str = "step") -> str:
        """The step's state: its latest task's (``completed``, ``failed``, ...)."""
        return str(self.tasks(instance_id, block_id)[-1]["state"])

    def expire(self, task_id: str | None = None) -> list[str]:
        """Make the claims of ``task_id`` (or every claimed task) quiet for longer
        than ``reap_after``, so the next poll re-offers them; return their IDs."""
        with self._lock:
            stale = self.clock() - self.reap_after - dt.timedelta(seconds=1)
            hit = [
                t
                for t in self._tasks.values()
                if t["state"] == "claimed" and task_id in (None, t["id"])
            ]
            for t in hit:
                t["heartbeat_at"] = stale.isoformat()
            return [str(t["id"]) for t in hit]

    def release_retries(self) -> list[str]:
        """Offer every retry still waiting out ``retry_backoff`` at once; return their IDs."""
        with self._lock:
            now = self.clock().isoformat()
            due = [
                t
                for t in self._tasks.values()
                if t["state"] == "pending" and t["available_at"] > now
            ]
            for t in due:
                t["available_at"] = now
            return [str(t["id"]) for t in due]

    def lose_next(self, action: str, times: int = 1) -> None:
        """Answer the next ``times`` ``action`` requests (``complete``, ``fail``,
        ``heartbeat``) with 503 before applying them: the request is lost."""
        with self._lock:
            self._lose[action] += times

    # -- the protocol ---------------------------------------------------------------------

    def _new_task(self, delay: dt.timedelta = dt.timedelta(0), **fields: Any) -> dict[str, Any]:
        now = self.clock()
        task = {
            "id": str(uuid.uuid4()),
            "queue_name": None,
            "state": "pending",
            "worker_id": None,
            "claimed_at": None,
            "heartbeat_at": None,
            "completed_at": None,
            "output": None,
            "error_message": None,
            "error_retryable": None,
            "created_at": now.isoformat(),
            "available_at": (now + delay).isoformat(),
            "claim_epoch": 0,
            **fields,
        }
        self._tasks[task["id"]] = task
        return task

    def _serve(self, request: BaseHTTPRequestHandler, method: str) -> None:
        match = _ROUTE.match(request.path.split("?", 1)[0])
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else {}
        answer: Any
        if match is None or (method == "GET") != (match["id"] is None and match["poll"] is None):
            status, answer = 404, {"error": "not found"}
            action = "unknown"
        elif method == "GET":
            action, status, answer = "list", 200, self.tasks()
        elif match["poll"]:
            action = "poll"
            status, answer = 200, self._poll(body)
        else:
            action = match["action"]
            status, answer = self._settle(match["id"], action, body)
        with self._lock:
            self.calls[(action, status)] += 1
        data = json.dumps(answer).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _poll(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        with self._lock:
            now = self.clock()
            self._reap(now)
            claimed: list[dict[str, Any]] = []
            for task in self._tasks.values():
                if len(claimed) >= int(body.get("limit", 1)):
                    break
                offered = task["state"] == "pending" and _at(task) <= now
                if offered and task["handler_name"] == body["handler_name"]:
                    task.update(
                        state="claimed",
                        worker_id=body["worker_id"],
                        claimed_at=now.isoformat(),
                        heartbeat_at=now.isoformat(),
                        claim_epoch=task["claim_epoch"] + 1,
                    )
                    claimed.append(dict(task))
            return claimed

    def _reap(self, now: dt.datetime) -> None:
        for task in self._tasks.values():
            quiet = task["state"] == "claimed" and (
                dt.datetime.fromisoformat(task["heartbeat_at"]) + self.reap_after < now
            )
            if quiet:
                task.update(state="pending", worker_id=None, claimed_at=None, heartbeat_at=None)

    def _settle(self, task_id: str, action: str, body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            if self._lose[action] > 0:
                self._lose[action] -= 1
                return 503, {"error": "service unavailable"}
            task = self._tasks.get(task_id)
            if action not in ("heartbeat", "complete", "fail") or task is None:
                return 404, {"error": "not found"}
            if not self._holds(task, body):
                if self.claim_epoch:
                    return 409, {"error": STALE_409}
                return 404, {"error": "worker task not found or not claimed by this worker"}
            now = self.clock().isoformat()
            if action == "heartbeat":
                task["heartbeat_at"] = now
            elif action == "complete":
                task.update(state="completed", completed_at=now, output=body.get("output"))
            else:
                self._fail(task, body, now)
            return 200, {}

    def _holds(self, task: dict[str, Any], body: dict[str, Any]) -> bool:
        if task["state"] != "claimed" or task["worker_id"] != body.get("worker_id"):
            return False
        epoch = body.get("claim_epoch")
        return not (self.claim_epoch and epoch is not None and epoch != task["claim_epoch"])

    def _fail(self, task: dict[str, Any], body: dict[str, Any], now: str) -> None:
        retryable = bool(body.get("retryable"))
        task.update(
            state="failed",
            completed_at=now,
            error_message=body.get("message"),
            error_retryable=retryable,
        )
        if retryable and task["attempt"] + 1 < self.max_attempts:
            self._new_task(
                self.retry_backoff,
                handler_name=task["handler_name"],
                instance_id=task["instance_id"],
                block_id=task["block_id"],
                params=task["params"],
                context=task["context"],
                attempt=task["attempt"] + 1,
                timeout_ms=task["timeout_ms"],
            )
