"""M7: without the extras nothing of them is imported and the library works;
with them, the instruments on the global providers start reporting once the
application installs an SDK, even when they were made before it.

Each case runs in a fresh interpreter, so module caches and the process-wide
providers of other tests play no part."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("opentelemetry", "prometheus_client", "starlette", "jinja2", "uvicorn", "multipart")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


BLOCKED = f"""
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ImportError(f"blocked for the test: {{name}}")
        return None

sys.meta_path.insert(0, Block())
"""


def test_m7_without_the_extras_nothing_is_imported_and_everything_runs() -> None:
    code = (
        BLOCKED
        + """
import datetime as dt, io, contextlib, tempfile
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
import inboxguard
from inboxguard.cli import main

engine = create_engine(f"sqlite:///{tempfile.mkdtemp()}/db.sqlite")
box = inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
box.create_schema()
for _ in range(2):
    with Session(engine) as session, session.begin():
        with box.guard(session, consumer="c", command_id="x", payload={}) as entry:
            pass
assert inboxguard.current_entry().duplicate
outbox = inboxguard.Outbox(engine)
outbox.create_schema()
with Session(engine) as session, session.begin():
    outbox.add(session, command_id="o", destination="d", payload={})
assert inboxguard.Dispatcher(outbox, lambda m: None).run_once() == 1
box.purge()
for command in (["serve-metrics", "--db", "sqlite://", "--port", "0"],
                ["dashboard", "--db", "sqlite://", "--port", "0"]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(command)
        except SystemExit as stop:
            code = stop.code
    assert code == 2, (command, code)
    print(err.getvalue().strip().splitlines()[-1])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in OPTIONAL)
print("loaded:", loaded)
""".replace("OPTIONAL", repr(OPTIONAL))
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert "loaded: []" in done.stdout
    assert "pip install 'inboxguard[prometheus]'" in done.stdout
    assert "pip install 'inboxguard[dashboard]'" in done.stdout


def test_m7_instruments_made_before_the_sdk_report_once_it_is_installed() -> None:
    code = """
import datetime as dt
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import inboxguard

engine = create_engine("sqlite://")
box = inboxguard.Inbox(engine, retention=dt.timedelta(days=1))
box.create_schema()

def run(cid):
    with Session(engine) as session, session.begin():
        with box.guard(session, consumer="c", command_id=cid, payload={}):
            pass

run("before")  # the instruments are made now, on the no-op proxies
reader, exporter = InMemoryMetricReader(), InMemorySpanExporter()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
tracing = TracerProvider()
tracing.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(tracing)
run("after")
run("after")
points = [
    (dict(p.attributes)["inboxguard.outcome"], p.value)
    for rm in reader.get_metrics_data().resource_metrics
    for sm in rm.scope_metrics
    for m in sm.metrics if m.name == "inboxguard.claims"
    for p in m.data.data_points
]
print(sorted(points))
print(sorted({s.name for s in exporter.get_finished_spans()}))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert "[('duplicate', 1), ('fresh', 1)]" in done.stdout
    assert "['inboxguard.claim', 'inboxguard.handler']" in done.stdout
