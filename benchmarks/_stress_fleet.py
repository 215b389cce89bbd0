"""The stress run's worker processes: started, SIGKILLed and replaced, stopped."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Fleet:
    """``size`` worker processes (``benchmarks._stress_worker``), one per slot.

    Each process writes its output to ``w<slot>-<n>.log`` and its guard-entry
    timings to ``w<slot>-<n>.stats`` in ``workdir``; it prints ``ready`` once
    it consumes.
    """

    def __init__(self, settings: dict[str, Any], size: int, workdir: Path) -> None:
        self.settings, self.workdir = settings, workdir
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * size
        self.logs: list[Path | None] = [None] * size
        self.started = 0
        self.kills = 0
        self.unexpected: list[str] = []

    def start(self, slot: int) -> None:
        self.started += 1
        name = f"w{slot:02d}-{self.started}"
        settings = {**self.settings, "stats": str(self.workdir / f"{name}.stats")}
        self.logs[slot] = self.workdir / f"{name}.log"
        with open(self.logs[slot], "wb") as log:
            self.procs[slot] = subprocess.Popen(
                [sys.executable, "-m", "benchmarks._stress_worker", json.dumps(settings)],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def start_all(self) -> None:
        for slot in range(len(self.procs)):
            self.start(slot)

    def consuming(self) -> list[int]:
        """The slots whose worker is running and has started consuming."""
        return [
            slot
            for slot, (proc, log) in enumerate(zip(self.procs, self.logs, strict=True))
            if proc is not None
            and proc.poll() is None
            and log is not None
            and b"ready" in log.read_bytes()
        ]

    def all_consuming(self) -> bool:
        """Whether every worker has started consuming."""
        return len(self.consuming()) == len(self.procs)

    def kill_one(self, rng: random.Random) -> bool:
        """SIGKILL a random consuming worker and start another in its place;
        False when none is consuming yet."""
        slots = self.consuming()
        if not slots:
            return False
        slot = rng.choice(slots)
        proc = self.procs[slot]
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.kills += 1
        self.start(slot)
        return True

    def reap(self) -> None:
        """Replace a worker that exited on its own, remembering why."""
        for slot, proc in enumerate(self.procs):
            if proc is not None and proc.poll() is not None:
                log = self.logs[slot]
                tail = log.read_text(errors="replace")[-2000:] if log else "(no log)"
                self.unexpected.append(f"worker {slot} exited {proc.returncode}: {tail}")
                print(f"  ! worker {slot} exited {proc.returncode}:\n{tail}", flush=True)
                self.start(slot)

    def stop_all(self, timeout: float = 60) -> int:
        """SIGTERM every worker (it finishes its delivery and closes its
        connection, and the broker takes back what it had not acked); SIGKILL
        those still running after ``timeout``. Returns how many were killed."""
        live = [p for p in self.procs if p is not None and p.poll() is None]
        for proc in live:
            proc.send_signal(signal.SIGTERM)
        forced = 0
        deadline = time.monotonic() + timeout
        for proc in live:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                forced += 1
        self.procs = [None] * len(self.procs)
        return forced

    def kill_all(self) -> None:
        """SIGKILL every worker (the run failed or was interrupted)."""
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
