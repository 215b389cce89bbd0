"""Run example scripts as ``__main__``, each in a forked child of one warm interpreter.

Usage: ``python fork_runner.py WORKDIR JOBS FILE...``; prints one JSON line
``{file name: [exit status, stdout, stderr]}``. A file named ``test_*.py`` is
run by pytest (``pytest.main``) in its child instead of as a script.

Importing SQLAlchemy, Celery, Dramatiq and inboxguard costs most of a small
script's run time, so this process imports them once and forks a child per
script. The child is a process of its own: it changes to an empty directory
of its own, runs the file with ``runpy.run_path(..., run_name="__main__")``
in a fresh namespace (a missing import still fails), and exits with the
script's status. Only the already-imported modules are shared, as copies.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path

PRELOAD = (
    "sqlalchemy.orm",
    "sqlalchemy.ext.asyncio",
    "aiosqlite",
    "inboxguard",
    "celery",
    "dramatiq",
    "dramatiq.brokers.stub",
    "kombu",
    "kombu.mixins",
    "aio_pika",
    "alembic.command",
    "pytest",
)
TIMEOUT = 90.0


def _child(script: Path, workdir: Path) -> None:
    workdir.mkdir(parents=True)
    os.chdir(workdir)
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(workdir / f".{name}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, fd)
        os.close(out)
    sys.argv = [str(script)]
    sys.path[0] = str(script.parent)
    status = 0
    try:
        if script.name.startswith("test_"):
            import pytest

            status = int(pytest.main(["-q", "-p", "no:cacheprovider", str(script)]))
        else:
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def main() -> None:
    base, jobs, scripts = Path(sys.argv[1]), int(sys.argv[2]), [Path(s) for s in sys.argv[3:]]
    for name in PRELOAD:
        importlib.import_module(name)
    pending, running, results = list(scripts), {}, {}
    while pending or running:
        while pending and len(running) < jobs:
            script = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(script, base / script.stem)
            running[pid] = (script, time.monotonic())
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            for child, (_script, started) in list(running.items()):
                if time.monotonic() - started > TIMEOUT:
                    os.kill(child, 9)
            time.sleep(0.01)
            continue
        script, _ = running.pop(pid)
        work = base / script.stem
        outputs = [(work / f".{n}").read_text(errors="replace") for n in ("stdout", "stderr")]
        results[script.name] = [os.waitstatus_to_exitcode(status), *outputs]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
