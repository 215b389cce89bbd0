"""The crash scenarios of ``benchmarks/peers.py``, played with real processes.

Each variant of :mod:`benchmarks._peers_variants` meets three deliveries of
its own command IDs, each first delivered by a child process:

Every child starts at once (imports and connections in parallel), says
``ready`` and waits; the parent then lets them deliver one at a time, so each
kill and the look at the variant's own record right after it happen well
inside the time to live.

- ``commit`` (a): the child's business transaction commits, then the child is
  killed with SIGKILL before the variant records the command (Powertools
  before it writes COMPLETED, the Redis inbox before its ``EXEC``, the lock
  while still held) and before the ack. The message comes back after every
  time-to-live has run out (a broker's visibility timeout, or a retry later).
- ``return``: the child's variant returned (its record written, its lock
  released), then the child is killed before the ack; the message comes back
  at once, each tool at its default time to live.
- ``late`` (b): the child handles the message and exits; the same message
  comes back after Powertools' ``expires_after_seconds`` and the lock's
  timeout have passed, well inside inboxguard's retention.

The short time to live (``ttl``, 2 s by default) stands in for the tools'
defaults (an hour for Powertools and celery-once, 60 s for the Redis inbox's
lease): the outcome is the same, only sooner. Whether a command was applied
twice is decided by counting its ledger rows, never assumed.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks._peers_variants import VARIANTS, Peers, Place, create, drop_keys

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("commit", "return", "late")
#: The line a child prints where it waits to be killed, per scenario.
SIGNAL = {"commit": "committed", "return": "returned", "late": "done"}
#: Seconds: the tools' time to live in the ``commit`` and ``late`` scenarios.
SHORT_TTL = 2


@dataclass(frozen=True)
class Outcome:
    """What one scenario did to one variant."""

    variant: str
    scenario: str
    applied: int  # ledger rows of the command at the end
    record_at_kill: str  # the variant's own record right after the kill
    redelivery: str  # what the redelivery did

    @property
    def twice(self) -> bool:
        return self.applied >= 2


def child(place_json: str, variant: str, scenario: str, cid: str) -> None:
    """Deliver ``cid`` to ``variant``; in ``commit`` and ``return`` wait to be killed."""

    def at_commit() -> None:
        if scenario == "commit":
            print(SIGNAL[scenario], flush=True)
            time.sleep(600)

    peers = Peers(Place(**json.loads(place_json)), committed=at_commit)
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    peers.handlers[variant](cid)
    print(SIGNAL[scenario], flush=True)
    if scenario == "return":
        time.sleep(600)
    peers.close()


def _spawn(place: Place, variant: str, scenario: str, cid: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "benchmarks._peers_crash"]
    args += [json.dumps(asdict(place)), variant, scenario, cid]
    with log.open("w") as err:
        return subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
            cwd=ROOT,
        )


def _await_line(proc: subprocess.Popen[str], expected: str, log: Path, timeout: float) -> None:
    """Wait (with a deadline) for the child's line; fail with its stderr otherwise."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
    line = proc.stdout.readline().strip() if ready else "(nothing within the deadline)"
    if line != expected:
        proc.kill()
        msg = f"child expected to print {expected!r}, printed {line!r}:\n{log.read_text()[-3000:]}"
        raise RuntimeError(msg)


def _redeliver(peers: Peers, variant: str, cid: str) -> str:
    before = peers.applied(cid)
    try:
        peers.handlers[variant](cid)
    except Exception as error:
        return f"refused ({type(error).__name__})"
    return "ran again" if peers.applied(cid) > before else "skipped as a duplicate"


def _wait(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            msg = f"records with a time to live still stand after {timeout} s"
            raise TimeoutError(msg)
        time.sleep(0.05)


def play(
    db_url: str,
    redis_url: str,
    prefix: str,
    variants: Sequence[str] = VARIANTS,
    *,
    ttl: int = SHORT_TTL,
    timeout: float = 60.0,
) -> list[Outcome]:
    """Play every scenario against every variant; one :class:`Outcome` each."""
    short = Place(db_url, redis_url, prefix, ttl=ttl)
    default = Place(db_url, redis_url, prefix, ttl=None)
    create(short, accounts=1)
    places = {"commit": short, "return": default, "late": short}
    cid = {(v, s): f"{v}:{s}" for v in variants for s in SCENARIOS}
    out: dict[tuple[str, str], Outcome] = {}
    with tempfile.TemporaryDirectory() as tmp:
        logs = {key: Path(tmp) / f"{key[0]}-{key[1]}.log" for key in cid}
        procs = {k: _spawn(places[k[1]], k[0], k[1], cid[k], logs[k]) for k in cid}
        parents = {s: Peers(places[s]) for s in SCENARIOS}
        try:
            for key, proc in procs.items():
                variant, scenario = key
                _await_line(proc, "ready", logs[key], timeout)
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
                _await_line(proc, SIGNAL[scenario], logs[key], timeout)
                peers = parents[scenario]
                committed = peers.applied(cid[key])
                if committed != 1:
                    msg = f"{key}: {committed} ledger rows where the child had committed one"
                    raise RuntimeError(msg)
                if scenario != "late":
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout)
                record = peers.record(variant, cid[key])
                redelivery = _redeliver(peers, variant, cid[key]) if scenario == "return" else ""
                out[key] = Outcome(variant, scenario, peers.applied(cid[key]), record, redelivery)
            later = [k for k in cid if k[1] != "return"]
            peers = parents["commit"]
            _wait(lambda: not any(peers.holds(v, cid[v, s]) for v, s in later), timeout)
            for key in later:
                redelivery = _redeliver(peers, key[0], cid[key])
                applied = peers.applied(cid[key])
                out[key] = Outcome(key[0], key[1], applied, out[key].record_at_kill, redelivery)
        finally:
            for proc in procs.values():
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            for peers in parents.values():
                peers.close()
            drop_keys(short)
    return [out[v, s] for v in variants for s in SCENARIOS]


if __name__ == "__main__":
    child(*sys.argv[1:5])
